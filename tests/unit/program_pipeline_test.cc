// Programs from source: program::CheckProgram's IR run by program::Evaluate
// against the same expression in numpy, so the evaluator is tested on what
// the checker really emits (promotion, weak literals, bool, reductions,
// layout, composite functions such as softmax).
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "core/mesh.h"
#include "program/checker.h"
#include "program/eval_value.h"
#include "tests/unit/program_numpy.h"

namespace shardmap {
namespace program {
namespace {

struct Source {
  const char* program;
  std::vector<std::pair<ElemType, Shape>> args;
  const char* numpy;
};

TEST(ProgramPipeline, CheckedProgramsEqualNumpy) {
  constexpr ElemType f32 = ElemType::kFloat32, i32 = ElemType::kInt32,
                     f64 = ElemType::kFloat64, i64 = ElemType::kInt64;
  const Source sources[] = {
      {"lambda x, w1, w2: relu(x @ w1) @ w2",
       {{f32, {4, 8}}, {f32, {8, 16}}, {f32, {16, 3}}},
       "relu(a[0] @ a[1]) @ a[2]"},
      {"lambda x: jnp.tanh(x * 0.5 + 0.25) * jax.nn.sigmoid(x) - "
       "jnp.exp(-x * x) / (1 + jnp.abs(x))",
       {{f32, {3, 1500}}},
       "np.tanh(a[0] * 0.5 + 0.25) * sigmoid(a[0]) - np.exp(-a[0] * a[0]) / "
       "(1 + np.abs(a[0]))"},
      {"lambda x: x // 3 + x % -2", {{i32, {5, 4}}}, "a[0] // 3 + a[0] % -2"},
      {"lambda x: x * 2.5", {{i32, {6}}}, "a[0] * np.float32(2.5)"},
      {"lambda x: softmax(x, axis=1)",
       {{f32, {3, 5}}},
       "np.exp(a[0] - a[0].max(1, keepdims=True)) / np.exp(a[0] - a[0].max(1, "
       "keepdims=True)).sum(1, keepdims=True)"},
      {"lambda x: logsumexp(x, axis=0)",
       {{f64, {4, 3}}},
       "np.log(np.exp(a[0]).sum(0))"},
      {"lambda x: jnp.sum(x, axis=0, keepdims=True) + jnp.mean(x) - "
       "jnp.max(x, axis=1)[:, None]",
       {{f64, {4, 3}}},
       "a[0].sum(0, keepdims=True) + a[0].mean() - a[0].max(1)[:, None]"},
      {"lambda x: jnp.where(x > 0, x, 0.0)",
       {{f32, {2, 7}}},
       "np.where(a[0] > 0, a[0], np.float32(0))"},
      {"lambda x: ((x > 0) & (x < 1)).astype(jnp.int32)",
       {{f32, {9}}},
       "((a[0] > 0) & (a[0] < 1)).astype(np.int32)"},
      {"lambda x: x.astype(jnp.int32) ** 2",
       {{f32, {8}}},
       "a[0].astype(np.int32) ** 2"},
      {"lambda x: jnp.concatenate([x, x], axis=0).T",
       {{i64, {2, 3}}},
       "np.concatenate([a[0], a[0]], axis=0).T"},
      {"lambda x: jnp.argmax(x, axis=1)",
       {{f32, {3, 6}}},
       "np.argmax(a[0], axis=1)"},
      {"lambda x: jnp.reshape(x, (4, 3)) + jnp.arange(3)",
       {{f32, {2, 6}}},
       "a[0].reshape(4, 3) + np.arange(3)"},
      {"lambda x: x[1:3, ::2] - jnp.ones_like(x[1:3, ::2])",
       {{i32, {4, 5}}},
       "a[0][1:3, ::2] - 1"},
      {"lambda x: jnp.stack([x, -x], axis=1)[..., 0]",
       {{f32, {3, 2}}},
       "np.stack([a[0], -a[0]], axis=1)[..., 0]"},
      {"lambda x: jnp.maximum(x, 1) + jnp.minimum(x, -1) + jnp.sqrt(jnp.abs(x))"
       " + jnp.log1p(jnp.abs(x)) + jnp.sin(x) * jnp.cos(x)",
       {{f64, {3, 3}}},
       "np.maximum(a[0], 1) + np.minimum(a[0], -1) + np.sqrt(np.abs(a[0])) + "
       "np.log1p(np.abs(a[0])) + np.sin(a[0]) * np.cos(a[0])"},
  };
  absl::StatusOr<Mesh> mesh = Mesh::Parse("i=1");
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  std::mt19937 rng(31);
  NumpyBatch batch;
  for (const Source& s : sources) {
    std::vector<ArgType> types;
    std::vector<Tensor> args;
    for (const auto& [elem, shape] : s.args) {
      types.push_back({elem, shape, {}});
      args.push_back(RandomTensor(StorageOf(elem), shape, rng, -3, 3));
    }
    CheckOptions options;
    options.check_vma = false;
    absl::StatusOr<Program> p = CheckProgram(s.program, *mesh, types, options);
    if (!p.ok()) {
      ADD_FAILURE() << s.program << ": " << p.status();
      continue;
    }
    const bool f32_only = s.args[0].first == f32;
    batch.Add(s.program, *std::move(p), std::move(args), s.numpy,
              f32_only ? 2e-5 : 1e-12, f32_only ? 1e-5 : 1e-12);
  }
  batch.Check();
}

}  // namespace
}  // namespace program
}  // namespace shardmap
