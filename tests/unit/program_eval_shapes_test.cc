// program::Evaluate: reductions, matmul, layout ops and fused chains
// against numpy (each case also runs unfused; see program_numpy.h).
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "program/eval_value.h"
#include "program/evaluator.h"
#include "tests/unit/program_builder.h"
#include "tests/unit/program_numpy.h"

namespace shardmap {
namespace program {
namespace {

shardmap::DType D(ElemType e) { return StorageOf(e); }

std::string PyTuple(const std::vector<int64_t>& v) {
  return absl::StrCat("(", absl::StrJoin(v, ", "), v.size() == 1 ? ",)" : ")");
}

TEST(ProgramEvaluatorShapes, ReductionsWithAxesAndKeepdimsEqualNumpy) {
  std::mt19937 rng(11);
  NumpyBatch batch;
  const std::pair<OpCode, const char*> ops[] = {{OpCode::kReduceSum, "np.sum"},
                                                {OpCode::kReduceMax, "np.max"},
                                                {OpCode::kReduceMin, "np.min"},
                                                {OpCode::kMean, "np.mean"}};
  for (ElemType e : kAll) {
    for (auto [op, fn] : ops) {
      for (int round = 0; round < 4; ++round) {
        Shape shape(std::uniform_int_distribution<int>(1, 4)(rng));
        for (int64_t& d : shape)
          d = std::uniform_int_distribution<int>(1, 6)(rng);
        std::vector<int64_t> axes;
        for (size_t d = 0; d < shape.size(); ++d) {
          if (rng() % 2 == 0) axes.push_back(d);
        }
        const bool keepdims = round % 2 == 1;
        const ElemType result = op == OpCode::kMean && (e == ElemType::kInt32 ||
                                                        e == ElemType::kInt64)
                                    ? ElemType::kFloat64
                                    : e;
        ProgramBuilder b;
        const int x = b.Param(e, shape);
        std::vector<Tensor> args;
        args.push_back(RandomTensor(D(e), shape, rng, -50, 50));
        batch.Add(absl::StrCat(fn, " ", ElemTypeName(e), " ", ShapeTuple(shape),
                               " axes ", PyTuple(axes)),
                  b.Build(b.Reduce(op, x, axes, keepdims, result)),
                  std::move(args),
                  absl::StrCat(fn, "(a[0], axis=", PyTuple(axes),
                               ", keepdims=", keepdims ? "True" : "False", ")"),
                  e == ElemType::kFloat32 ? 1e-5 : 1e-12,
                  e == ElemType::kFloat32 ? 1e-4 : 0);
      }
    }
    for (int round = 0; round < 3; ++round) {
      const Shape shape = {3, 4, 5};
      const int64_t axis = round;
      ProgramBuilder b;
      const int x = b.Param(e, shape);
      std::vector<Tensor> args;
      args.push_back(RandomTensor(D(e), shape, rng, -4, 4));  // ties in ints
      batch.Add(absl::StrCat("argmax ", ElemTypeName(e), " axis ", axis),
                b.Build(b.Reduce(OpCode::kArgMax, x, {axis}, round == 1,
                                 ElemType::kInt32)),
                std::move(args),
                absl::StrCat("np.argmax(a[0], axis=", axis, ", keepdims=",
                             round == 1 ? "True" : "False", ")"));
    }
  }
  batch.Check();
}

TEST(ProgramEvaluatorShapes, MatmulOfEveryRankEqualsNumpy) {
  std::mt19937 rng(12);
  NumpyBatch batch;
  const std::pair<Shape, Shape> shapes[] = {
      {{4}, {4}},          {{4}, {4, 3}},
      {{2, 4}, {4}},       {{2, 4}, {4, 3}},
      {{5, 2, 4}, {4, 3}}, {{4}, {5, 4, 3}},
      {{5, 2, 4}, {4}},    {{2, 1, 3, 4}, {5, 4, 2}},
      {{3, 0}, {0, 2}},    {{0, 3}, {3, 2}},
      {{40, 70}, {70, 30}}};
  for (ElemType e : kAll) {
    for (const auto& [as, bs] : shapes) {
      ProgramBuilder b;
      const int x = b.Param(e, as), y = b.Param(e, bs);
      std::vector<Tensor> args;
      args.push_back(RandomTensor(D(e), as, rng, -5, 5));
      args.push_back(RandomTensor(D(e), bs, rng, -5, 5));
      batch.Add(absl::StrCat("matmul ", ElemTypeName(e), " ", ShapeTuple(as),
                             " @ ", ShapeTuple(bs)),
                b.Build(b.MatMul(x, y)), std::move(args), "a[0] @ a[1]",
                e == ElemType::kFloat32 ? 1e-5 : 1e-12,
                e == ElemType::kFloat32 ? 1e-3 : 1e-10);
    }
  }
  batch.Check();
}

// A 2-D transpose used only by a matmul is folded into it (fused mode);
// unfused it is materialized: both equal numpy.
TEST(ProgramEvaluatorShapes, MatmulOfTransposedOperandsEqualsNumpy) {
  std::mt19937 rng(15);
  NumpyBatch batch;
  for (ElemType e : {ElemType::kFloat32, ElemType::kInt64}) {
    const double rtol = e == ElemType::kFloat32 ? 1e-5 : 0;
    const double atol = e == ElemType::kFloat32 ? 1e-3 : 0;
    auto args = [&](std::vector<Shape> shapes) {
      std::vector<Tensor> out;
      for (Shape& s : shapes) out.push_back(RandomTensor(D(e), s, rng, -5, 5));
      return out;
    };
    {
      ProgramBuilder b;
      const int x = b.Param(e, {70, 40}), y = b.Param(e, {70, 30});
      batch.Add("x.T @ y", b.Build(b.MatMul(b.Transpose(x, {1, 0}), y)),
                args({{70, 40}, {70, 30}}), "a[0].T @ a[1]", rtol, atol);
    }
    {
      ProgramBuilder b;
      const int x = b.Param(e, {40, 70}), y = b.Param(e, {30, 70});
      batch.Add("x @ y.T", b.Build(b.MatMul(x, b.Transpose(y, {1, 0}))),
                args({{40, 70}, {30, 70}}), "a[0] @ a[1].T", rtol, atol);
    }
    {  // Both sides the same transpose, and a vector.
      ProgramBuilder b;
      const int x = b.Param(e, {9, 9}), v = b.Param(e, {9});
      const int t = b.Transpose(x, {1, 0});
      const int m = b.MatMul(t, t);
      batch.Add("x.T @ x.T @ v", b.Build(b.MatMul(m, v)), args({{9, 9}, {9}}),
                "a[0].T @ a[0].T @ a[1]", rtol, atol);
    }
    {  // A transpose with another user is not folded.
      ProgramBuilder b;
      const int x = b.Param(e, {6, 4}), r = b.Param(e, {6});
      const int t = b.Transpose(x, {1, 0});
      const int g = b.MatMul(t, r);
      batch.Add(
          "x.T @ r + sum(x.T)",
          b.Build(b.Binary(OpCode::kAdd, g,
                           b.Reduce(OpCode::kReduceSum, t, {1}, false, e))),
          args({{6, 4}, {6}}), "a[0].T @ a[1] + a[0].T.sum(1)", rtol, atol);
    }
  }
  batch.Check();
}

TEST(ProgramEvaluatorShapes, LayoutOpsEqualNumpy) {
  std::mt19937 rng(13);
  NumpyBatch batch;
  for (ElemType e : kAll) {
    const std::string name = ElemTypeName(e);
    auto arg = [&](Shape s) {
      std::vector<Tensor> args;
      args.push_back(RandomTensor(D(e), s, rng, -9, 9));
      return args;
    };
    {
      ProgramBuilder b;
      const int x = b.Param(e, {2, 3, 4});
      batch.Add("transpose " + name, b.Build(b.Transpose(x, {2, 0, 1})),
                arg({2, 3, 4}), "np.transpose(a[0], (2, 0, 1))");
    }
    {  // A reshape shares its operand's buffer, which is read on after.
      ProgramBuilder b;
      const int x = b.Param(e, {2, 6});
      const int r = b.Reshape(x, {3, 4});
      const int s = b.Reduce(OpCode::kReduceMax, x, {1}, false, e);
      const int t =
          b.Binary(OpCode::kAdd, r, b.Reshape(b.Concatenate({s, s}, 0), {4}));
      batch.Add("reshape " + name, b.Build(t), arg({2, 6}),
                "a[0].reshape(3, 4) + np.concatenate([a[0].max(1)] * 2)");
    }
    {
      ProgramBuilder b;
      const int x = b.Param(e, {7, 9, 3});
      batch.Add("slice " + name,
                b.Build(b.Slice(x, {1, 0, 2}, {7, 9, 3}, {2, 4, 1})),
                arg({7, 9, 3}), "a[0][1:7:2, 0:9:4, 2:3]");
    }
    {
      ProgramBuilder b;
      const int x = b.Param(e, {2, 3}), y = b.Param(e, {2, 1});
      std::vector<Tensor> args = arg({2, 3});
      args.push_back(RandomTensor(D(e), {2, 1}, rng));
      batch.Add("concatenate " + name, b.Build(b.Concatenate({x, y, x}, 1)),
                std::move(args), "np.concatenate([a[0], a[1], a[0]], axis=1)");
    }
    {
      ProgramBuilder b;
      const int x = b.Param(e, {3, 1});
      batch.Add("broadcast " + name, b.Build(b.BroadcastTo(x, {2, 3, 4})),
                arg({3, 1}), "np.broadcast_to(a[0], (2, 3, 4))");
    }
    {
      ProgramBuilder b;
      const int x = b.Param(e, {6});
      const int c = b.Constant(e, {2, 6}, 3);
      const int i = b.Iota(e, 6, 2, 3);
      const int r = b.Binary(OpCode::kSub, b.Binary(OpCode::kMul, c, x), i);
      batch.Add(
          "constant and arange " + name, b.Build(r), arg({6}),
          absl::StrCat("np.full((2, 6), 3, dtype='", name,
                       "') * a[0] - np.arange(2, 20, 3, dtype='", name, "')"));
    }
  }
  batch.Check();
}

// y = tanh(x * a + b) * sigmoid(x) - exp(-x * x) / (1 + abs(x)), with a
// row vector, a column vector and scalars broadcasting, over more
// elements than one tile: fused, unfused and numpy agree.
TEST(ProgramEvaluatorShapes, FusedChainWithBroadcastOperandsEqualsNumpy) {
  std::mt19937 rng(14);
  NumpyBatch batch;
  for (ElemType e : {ElemType::kFloat32, ElemType::kFloat64}) {
    ProgramBuilder b;
    const int x = b.Param(e, {3, 1500});
    const int a = b.Param(e, {1500});
    const int c = b.Param(e, {3, 1});
    const int one = b.Constant(e, {}, 1);
    const int t = b.Unary(
        OpCode::kTanh, b.Binary(OpCode::kAdd, b.Binary(OpCode::kMul, x, a), c));
    const int s = b.Binary(OpCode::kMul, t, b.Unary(OpCode::kSigmoid, x));
    const int g = b.Unary(OpCode::kExp,
                          b.Unary(OpCode::kNeg, b.Binary(OpCode::kMul, x, x)));
    const int d = b.Binary(OpCode::kAdd, one, b.Unary(OpCode::kAbs, x));
    const int y = b.Binary(OpCode::kSub, s, b.Binary(OpCode::kDiv, g, d));
    std::vector<Tensor> args;
    args.push_back(RandomTensor(D(e), {3, 1500}, rng));
    args.push_back(RandomTensor(D(e), {1500}, rng));
    args.push_back(RandomTensor(D(e), {3, 1}, rng));
    batch.Add(absl::StrCat("chain ", ElemTypeName(e)), b.Build(y),
              std::move(args),
              "np.tanh(a[0] * a[1] + a[2]) * sigmoid(a[0]) - "
              "np.exp(-a[0] * a[0]) / (1 + np.abs(a[0]))",
              e == ElemType::kFloat32 ? 2e-5 : 1e-12,
              e == ElemType::kFloat32 ? 1e-6 : 1e-14);
  }
  batch.Check();
}

}  // namespace
}  // namespace program
}  // namespace shardmap
