// program::Evaluate's run-time rules: the memory limit (values freed after
// their last use, fused chains holding no temporaries), cancellation,
// argument checks and the refusal of malformed programs.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <vector>

#include "program/evaluator.h"
#include "tests/unit/program_builder.h"
#include "tests/unit/program_numpy.h"
#include "tests/unit/status_matchers.h"

namespace shardmap {
namespace program {
namespace {

constexpr ElemType kF32 = ElemType::kFloat32;

std::vector<Tensor> Args(std::vector<Shape> shapes) {
  std::mt19937 rng(7);
  std::vector<Tensor> args;
  for (Shape& s : shapes) {
    args.push_back(RandomTensor(shardmap::DType::kFloat32, std::move(s), rng));
  }
  return args;
}

// A 12-instruction elementwise chain over x of `shape`.
Program Chain(const Shape& shape) {
  ProgramBuilder b;
  const int x = b.Param(kF32, shape);
  const int one = b.Constant(kF32, {}, 1);
  const int t =
      b.Unary(OpCode::kTanh,
              b.Binary(OpCode::kAdd, b.Binary(OpCode::kMul, x, one), one));
  const int s = b.Binary(OpCode::kMul, t, b.Unary(OpCode::kSigmoid, x));
  const int g = b.Unary(OpCode::kExp,
                        b.Unary(OpCode::kNeg, b.Binary(OpCode::kMul, x, x)));
  const int d = b.Binary(OpCode::kAdd, one, b.Unary(OpCode::kAbs, x));
  return b.Build(b.Binary(OpCode::kSub, s, b.Binary(OpCode::kDiv, g, d)));
}

TEST(ProgramEvalRuntime, AFusedChainHoldsNoWholeArrayTemporaries) {
  const Shape shape = {4, 100000};  // 1.6 MB per value
  EvalOptions fused;
  fused.max_bytes = 1 << 20;
  auto out = Evaluate(Chain(shape), Args({shape}), nullptr, fused);
  EXPECT_TRUE(out.ok()) << out.status();

  EvalOptions plain = fused;
  plain.fuse = false;
  EXPECT_TRUE(
      StatusIs(Evaluate(Chain(shape), Args({shape}), nullptr, plain).status(),
               absl::StatusCode::kResourceExhausted,
               {"instruction", "over the program's limit of 1048576"}));
}

TEST(ProgramEvalRuntime, AFoldedTransposeIsNeverMaterialized) {
  // x.T @ r, the data-parallel gradient's shape: x is 2 MB.
  ProgramBuilder b;
  const int x = b.Param(kF32, {1000, 500});
  const int r = b.Param(kF32, {1000});
  const Program p = b.Build(b.MatMul(b.Transpose(x, {1, 0}), r));
  EvalOptions fused;
  fused.max_bytes = 1 << 20;
  auto out = Evaluate(p, Args({{1000, 500}, {1000}}), nullptr, fused);
  EXPECT_TRUE(out.ok()) << out.status();
  EvalOptions plain = fused;
  plain.fuse = false;
  EXPECT_TRUE(StatusIs(
      Evaluate(p, Args({{1000, 500}, {1000}}), nullptr, plain).status(),
      absl::StatusCode::kResourceExhausted, {"(transpose"}));
}

TEST(ProgramEvalRuntime, ValuesAreFreedAfterTheirLastUse) {
  // x + 1, five times, unfused, then a matmul-free reduction: at most two
  // 1.6 MB values are ever alive.
  const Shape shape = {4, 100000};
  ProgramBuilder b;
  int v = b.Param(kF32, shape);
  const int one = b.Constant(kF32, {}, 1);
  for (int k = 0; k < 5; ++k) {
    v = b.Binary(OpCode::kMul, b.Binary(OpCode::kAdd, v, one), v);
  }
  const Program p = b.Build(b.Reduce(OpCode::kReduceSum, v, {1}, false, kF32));
  EvalOptions options;
  options.fuse = false;
  options.max_bytes = 2 * 1600000 + 100000;
  auto out = Evaluate(p, Args({shape}), nullptr, options);
  EXPECT_TRUE(out.ok()) << out.status();
}

TEST(ProgramEvalRuntime,
     TheLimitIsCheckedBeforeAllocatingAndNamesTheInstruction) {
  ProgramBuilder b;
  const int x = b.Param(kF32, {1000, 10});
  const int y = b.Param(kF32, {10, 1000});
  const Program p = b.Build(b.MatMul(x, y));  // 4 MB
  EvalOptions options;
  options.max_bytes = 1 << 20;
  EXPECT_TRUE(StatusIs(
      Evaluate(p, Args({{1000, 10}, {10, 1000}}), nullptr, options).status(),
      absl::StatusCode::kResourceExhausted,
      {"instruction 2 (matmul at line 1, column 3) needs 4000000 bytes"}));
}

TEST(ProgramEvalRuntime, CancellationStopsBetweenInstructions) {
  std::atomic<int> polls{0};
  EvalOptions options;
  options.fuse = false;
  options.cancelled = [&] { return ++polls > 3; };
  EXPECT_TRUE(
      StatusIs(Evaluate(Chain({8}), Args({{8}}), nullptr, options).status(),
               absl::StatusCode::kCancelled, {"before instruction 3"}));
  EXPECT_EQ(polls.load(), 4);
}

TEST(ProgramEvalRuntime, ArgumentsMustMatchTheParameters) {
  ProgramBuilder b;
  const int x = b.Param(kF32, {2, 3});
  const int y = b.Param(ElemType::kInt32, {3});
  const Program p = b.Build(b.Binary(OpCode::kAdd, x, b.Convert(y, kF32)));
  EXPECT_TRUE(StatusIs(Evaluate(p, Args({{2, 3}}), nullptr).status(),
                       absl::StatusCode::kInvalidArgument,
                       {"takes 2 arguments, got 1"}));
  EXPECT_TRUE(StatusIs(Evaluate(p, Args({{2, 3}, {3}}), nullptr).status(),
                       absl::StatusCode::kInvalidArgument,
                       {"argument 1 is float32[3]", "checked for int32[3]"}));
  std::vector<Tensor> args = Args({{3, 2}});
  args.emplace_back(shardmap::DType::kInt32, Shape{3});
  EXPECT_TRUE(StatusIs(Evaluate(p, std::move(args), nullptr).status(),
                       absl::StatusCode::kInvalidArgument,
                       {"argument 0 is float32[3,2]"}));
}

TEST(ProgramEvalRuntime, MalformedProgramsAreRefusedBeforeRunning) {
  auto refused = [](Program p, std::vector<Shape> shapes, const char* what) {
    return StatusIs(Evaluate(p, Args(std::move(shapes)), nullptr).status(),
                    absl::StatusCode::kInvalidArgument,
                    {"malformed program", what});
  };
  {
    ProgramBuilder b;
    const int x = b.Param(kF32, {3});
    b.Emit(OpCode::kAdd, {x, 5}, {kF32, {3}, {}});
    EXPECT_TRUE(refused(b.Build(1), {{3}}, "not an earlier instruction"));
  }
  {
    ProgramBuilder b;
    const int x = b.Param(kF32, {3}), y = b.Param(kF32, {4});
    b.Emit(OpCode::kAdd, {x, y}, {kF32, {4}, {}});
    EXPECT_TRUE(refused(b.Build(2), {{3}, {4}}, "does not broadcast"));
  }
  {
    ProgramBuilder b;
    const int x = b.Param(kF32, {5});
    Attrs a;
    a.starts = {2};
    a.limits = {9};
    a.strides = {1};
    b.Emit(OpCode::kSlice, {x}, {kF32, {7}, {}}, a);
    EXPECT_TRUE(refused(b.Build(1), {{5}}, "out of range"));
  }
  {
    ProgramBuilder b;
    const int x = b.Param(kF32, {2, 3});
    Attrs a;
    a.perm = {0, 0};
    b.Emit(OpCode::kTranspose, {x}, {kF32, {2, 2}, {}}, a);
    EXPECT_TRUE(refused(b.Build(1), {{2, 3}}, "not a permutation"));
  }
  {
    ProgramBuilder b;
    const int x = b.Param(kF32, {0, 3});
    b.Reduce(OpCode::kReduceMax, x, {0}, false, kF32);
    EXPECT_TRUE(refused(b.Build(1), {{0, 3}}, "empty axis"));
  }
  {
    ProgramBuilder b;
    const int x = b.Param(ElemType::kInt32, {3});
    b.Emit(OpCode::kExp, {x}, {ElemType::kInt32, {3}, {}});
    std::vector<Tensor> args;
    args.emplace_back(shardmap::DType::kInt32, Shape{3});
    EXPECT_TRUE(
        StatusIs(Evaluate(b.Build(1), std::move(args), nullptr).status(),
                 absl::StatusCode::kInvalidArgument,
                 {"instruction 1 (exp", "takes floats, not int32"}));
  }
}

TEST(ProgramEvalRuntime, CollectivesWithoutACommunicatorFail) {
  ProgramBuilder b;
  const int x = b.Param(kF32, {3});
  Attrs a;
  a.mesh_axes = {"i"};
  const Program p =
      b.Build(b.Collective(OpCode::kPsum, {x}, {kF32, {3}, {}}, a));
  EXPECT_TRUE(StatusIs(Evaluate(p, Args({{3}}), nullptr).status(),
                       absl::StatusCode::kFailedPrecondition,
                       {"instruction 1 (psum", "no communicator"}));
}

TEST(ProgramEvalRuntime, OutputsMayRepeatOrBeArgumentsOrReshapes) {
  ProgramBuilder b;
  const int x = b.Param(kF32, {2, 3});
  const int r = b.Reshape(x, {3, 2});
  const int z = b.Param(kF32, {0, 4});
  const int e = b.Unary(OpCode::kExp, z);
  b.Output(r);
  b.Output(x);
  b.Output(r);
  b.Output(e);
  std::vector<Tensor> args = Args({{2, 3}, {0, 4}});
  const Tensor copy = args[0].Clone();
  auto out = Evaluate(b.Build(), std::move(args), nullptr);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 4u);
  EXPECT_EQ((*out)[0].shape(), (Shape{3, 2}));
  EXPECT_EQ((*out)[1].shape(), (Shape{2, 3}));
  EXPECT_EQ((*out)[2].shape(), (Shape{3, 2}));
  EXPECT_EQ((*out)[3].shape(), (Shape{0, 4}));
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(std::memcmp((*out)[k].data(), copy.data(), copy.num_bytes()), 0);
  }
}

// Random damage to valid programs (operands, shapes, elems, attributes):
// every run ends with a status, never a crash (run under ASan/UBSan too).
TEST(ProgramEvalRuntime, DamagedProgramsNeverCrash) {
  std::vector<Program> seeds;
  seeds.push_back(Chain({3, 4}));
  {
    ProgramBuilder b;
    const int x = b.Param(kF32, {2, 3, 4});
    const int y = b.Param(kF32, {4, 2});
    const int m = b.MatMul(b.Transpose(x, {1, 0, 2}), y);
    const int s = b.Slice(m, {0, 1, 0}, {3, 2, 2}, {2, 1, 1});
    const int c = b.Concatenate({s, s}, 1);
    const int r = b.Reduce(OpCode::kArgMax, b.Reshape(c, {2, 2, 2}), {2}, true,
                           ElemType::kInt32);
    const int t = b.Reduce(OpCode::kMean, b.BroadcastTo(y, {3, 4, 2}), {0, 2},
                           false, kF32);
    const int w = b.Elementwise(
        OpCode::kSelect, {b.Binary(OpCode::kGt, t, b.Constant(kF32, {}, 0)), t,
                          b.Convert(b.Iota(ElemType::kInt32, 4, 0, 1), kF32)});
    b.Output(r);
    seeds.push_back(b.Build(w));
  }
  std::mt19937 rng(99);
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  int ran = 0;
  for (int round = 0; round < 3000; ++round) {
    Program p = seeds[round % seeds.size()];
    for (int k = pick(1, 3); k > 0; --k) {
      Instr& in = p.instrs[pick(0, p.instrs.size() - 1)];
      switch (pick(0, 6)) {
        case 0:
          if (!in.operands.empty()) {
            in.operands[pick(0, in.operands.size() - 1)] =
                pick(-1, p.instrs.size());
          }
          break;
        case 1:
          if (!in.type.shape.empty()) {
            in.type.shape[pick(0, in.type.shape.size() - 1)] = pick(-1, 6);
          } else {
            in.type.shape.push_back(pick(0, 3));
          }
          break;
        case 2:
          in.type.elem = static_cast<ElemType>(pick(0, 4));
          break;
        case 3:
          in.attrs.axes = {pick(-1, 3), pick(-1, 3)};
          break;
        case 4:
          in.attrs.perm = {pick(-1, 3), pick(-1, 3), pick(-1, 3)};
          in.attrs.axis = pick(-1, 3);
          break;
        case 5:
          for (auto* v :
               {&in.attrs.starts, &in.attrs.limits, &in.attrs.strides}) {
            if (!v->empty()) (*v)[pick(0, v->size() - 1)] = pick(-2, 6);
          }
          break;
        default:
          in.op = static_cast<OpCode>(
              pick(0, static_cast<int>(OpCode::kBroadcast)));
      }
    }
    std::vector<Tensor> args;
    for (const ValueType& t : p.params) {
      absl::StatusOr<Tensor> a = Tensor::Create(t.elem == ElemType::kFloat64
                                                    ? shardmap::DType::kFloat64
                                                    : shardmap::DType::kFloat32,
                                                t.shape, 1 << 20);
      if (!a.ok()) break;
      std::memset(a->data(), 0, a->num_bytes());
      args.push_back(*std::move(a));
    }
    EvalOptions options;
    options.fuse = round % 2 == 0;
    options.max_bytes = 16 << 20;
    ran += Evaluate(p, std::move(args), nullptr, options).ok();
  }
  EXPECT_GT(ran, 0);  // some damage is harmless (e.g. a changed axis)
}

}  // namespace
}  // namespace program
}  // namespace shardmap
