// program::Evaluate, every op against numpy over random shapes and dtypes
// (tests/unit/program_numpy.h runs each case fused and unfused too).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "program/eval_value.h"
#include "program/evaluator.h"
#include "tests/unit/program_builder.h"
#include "tests/unit/program_numpy.h"

namespace shardmap {
namespace program {
namespace {

shardmap::DType D(ElemType e) { return StorageOf(e); }

bool IsFloat(ElemType e) {
  return e == ElemType::kFloat32 || e == ElemType::kFloat64;
}
double Rtol(ElemType e) { return e == ElemType::kFloat32 ? 2e-5 : 1e-12; }

Shape RandomShape(std::mt19937& rng, int max_rank = 3) {
  Shape s(std::uniform_int_distribution<int>(0, max_rank)(rng));
  for (int64_t& d : s) d = std::uniform_int_distribution<int>(1, 5)(rng);
  return s;
}

// A shape that broadcasts against `s`: some dimensions 1, some leading
// dimensions dropped.
Shape Partner(const Shape& s, std::mt19937& rng) {
  Shape p = s;
  for (int64_t& d : p) {
    if (rng() % 3 == 0) d = 1;
  }
  while (!p.empty() && rng() % 4 == 0) p.erase(p.begin());
  return p;
}

TEST(ProgramEvaluator, UnaryFloatOpsEqualNumpy) {
  std::mt19937 rng(1);
  NumpyBatch batch;
  const std::pair<OpCode, const char*> ops[] = {
      {OpCode::kNeg, "-a[0]"},
      {OpCode::kAbs, "np.abs(a[0])"},
      {OpCode::kExp, "np.exp(a[0])"},
      {OpCode::kLog, "np.log(a[0])"},
      {OpCode::kLog1p, "np.log1p(a[0])"},
      {OpCode::kSqrt, "np.sqrt(a[0])"},
      {OpCode::kTanh, "np.tanh(a[0])"},
      {OpCode::kSin, "np.sin(a[0])"},
      {OpCode::kCos, "np.cos(a[0])"},
      {OpCode::kRelu, "relu(a[0])"},
      {OpCode::kSigmoid, "sigmoid(a[0])"}};
  for (ElemType e : {ElemType::kFloat32, ElemType::kFloat64}) {
    for (auto [op, expr] : ops) {
      const bool positive =
          op == OpCode::kLog || op == OpCode::kSqrt || op == OpCode::kLog1p;
      ProgramBuilder b;
      const Shape shape = RandomShape(rng);
      const int x = b.Param(e, shape);
      std::vector<Tensor> args;
      args.push_back(RandomTensor(D(e), shape, rng, positive ? 0.01 : -8, 8));
      batch.Add(absl::StrCat(OpName(op), " ", ElemTypeName(e)),
                b.Build(b.Unary(op, x)), std::move(args), expr, Rtol(e),
                e == ElemType::kFloat32 ? 1e-6 : 1e-14);
    }
  }
  batch.Check();
}

TEST(ProgramEvaluator, UnaryIntegerOpsEqualNumpyIncludingTheMinimum) {
  std::mt19937 rng(2);
  NumpyBatch batch;
  const std::pair<OpCode, const char*> ops[] = {{OpCode::kNeg, "-a[0]"},
                                                {OpCode::kAbs, "np.abs(a[0])"},
                                                {OpCode::kRelu, "relu(a[0])"},
                                                {OpCode::kNot, "~a[0]"}};
  for (ElemType e : {ElemType::kInt32, ElemType::kInt64}) {
    for (auto [op, expr] : ops) {
      ProgramBuilder b;
      const int x = b.Param(e, {7});
      std::vector<Tensor> args;
      args.push_back(RandomTensor(D(e), {7}, rng, -100, 100));
      if (e == ElemType::kInt32) {
        args[0].data_as<int32_t>()[0] = std::numeric_limits<int32_t>::min();
      } else {
        args[0].data_as<int64_t>()[0] = std::numeric_limits<int64_t>::min();
      }
      batch.Add(absl::StrCat(OpName(op), " ", ElemTypeName(e)),
                b.Build(b.Unary(op, x)), std::move(args), expr);
    }
  }
  batch.Check();
}

TEST(ProgramEvaluator, BinaryOpsBroadcastAsNumpy) {
  std::mt19937 rng(3);
  NumpyBatch batch;
  const std::pair<OpCode, const char*> ops[] = {
      {OpCode::kAdd, "np.add"},          {OpCode::kSub, "np.subtract"},
      {OpCode::kMul, "np.multiply"},     {OpCode::kMax, "np.maximum"},
      {OpCode::kMin, "np.minimum"},      {OpCode::kEq, "np.equal"},
      {OpCode::kNe, "np.not_equal"},     {OpCode::kLt, "np.less"},
      {OpCode::kLe, "np.less_equal"},    {OpCode::kGt, "np.greater"},
      {OpCode::kGe, "np.greater_equal"}, {OpCode::kPow, "np.power"}};
  for (ElemType e : kAll) {
    for (auto [op, fn] : ops) {
      for (int round = 0; round < 3; ++round) {
        ProgramBuilder b;
        Shape xs = RandomShape(rng), ys = Partner(xs, rng);
        if (round == 1) std::swap(xs, ys);
        const int x = b.Param(e, xs), y = b.Param(e, ys);
        std::vector<Tensor> args;
        const bool pow = op == OpCode::kPow;
        args.push_back(RandomTensor(D(e), xs, rng, pow ? 0.1 : -3, 3));
        args.push_back(RandomTensor(D(e), ys, rng, pow ? 0 : -3, pow ? 5 : 3));
        batch.Add(absl::StrCat(OpName(op), " ", ElemTypeName(e), " ",
                               ShapeTuple(xs), " ", ShapeTuple(ys)),
                  b.Build(b.Binary(op, x, y)), std::move(args),
                  absl::StrCat(fn, "(a[0], a[1])"), Rtol(e));
      }
    }
  }
  batch.Check();
}

TEST(ProgramEvaluator, FloorDivideAndModHavePythonSignsAndZeroDivisors) {
  std::mt19937 rng(4);
  NumpyBatch batch;
  for (ElemType e : kAll) {
    for (auto [op, fn] : {std::pair{OpCode::kFloorDiv, "np.floor_divide"},
                          std::pair{OpCode::kMod, "np.mod"}}) {
      ProgramBuilder b;
      const int x = b.Param(e, {4, 25}), y = b.Param(e, {25});
      std::vector<Tensor> args;
      args.push_back(RandomTensor(D(e), {4, 25}, rng, -20, 20));
      args.push_back(RandomTensor(D(e), {25}, rng, -4, 4));
      // Zero divisors, and a fractional one for floats.
      VisitElem(e, [&](auto tag) {
        using T = decltype(tag);
        args[1].data_as<T>()[0] = 0;
        args[1].data_as<T>()[1] = static_cast<T>(IsFloat(e) ? -2.5 : -3);
        if (e == ElemType::kInt32) {
          args[0].data_as<T>()[2] = std::numeric_limits<T>::min();
          args[1].data_as<T>()[2] = -1;
        }
      });
      batch.Add(absl::StrCat(OpName(op), " ", ElemTypeName(e)),
                b.Build(b.Binary(op, x, y)), std::move(args),
                absl::StrCat(fn, "(a[0], a[1])"), Rtol(e));
    }
  }
  // True division of floats.
  for (ElemType e : {ElemType::kFloat32, ElemType::kFloat64}) {
    ProgramBuilder b;
    const int x = b.Param(e, {3, 4}), y = b.Param(e, {3, 1});
    std::vector<Tensor> args;
    args.push_back(RandomTensor(D(e), {3, 4}, rng));
    args.push_back(RandomTensor(D(e), {3, 1}, rng));
    batch.Add("divide", b.Build(b.Binary(OpCode::kDiv, x, y)), std::move(args),
              "a[0] / a[1]", Rtol(e));
  }
  batch.Check();
}

TEST(ProgramEvaluator, IntegerPowerOfANegativeExponentTruncates) {
  ProgramBuilder b;
  const int x = b.Param(ElemType::kInt32, {5});
  const int y = b.Param(ElemType::kInt32, {5});
  std::vector<Tensor> args;
  args.emplace_back(shardmap::DType::kInt32, Shape{5});
  args.emplace_back(shardmap::DType::kInt32, Shape{5});
  const int32_t base[] = {1, -1, -1, 2, 0}, exponent[] = {-3, -3, -2, -1, -1};
  std::copy_n(base, 5, args[0].data_as<int32_t>());
  std::copy_n(exponent, 5, args[1].data_as<int32_t>());
  auto out =
      Evaluate(b.Build(b.Binary(OpCode::kPow, x, y)), std::move(args), nullptr);
  ASSERT_TRUE(out.ok()) << out.status();
  const int32_t* o = (*out)[0].data_as<int32_t>();
  EXPECT_EQ(std::vector<int32_t>(o, o + 5),
            (std::vector<int32_t>{1, -1, 1, 0, 0}));
}

// relu keeps NaN and turns -0.0 into +0.0 (as jax.nn.relu), with each
// special value at every position of a vector long enough for SIMD packets
// and a scalar tail.
TEST(ProgramEvaluator, ReluKeepsNaNAndZeroesNegativeZeroAtEveryPosition) {
  const float specials[] = {std::nanf(""),
                            -0.0f,
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::infinity(),
                            -0.25f,
                            0.25f};
  for (const float special : specials) {
    for (int at = 0; at < 37; ++at) {
      ProgramBuilder b;
      const int x = b.Param(ElemType::kFloat32, {37});
      std::vector<Tensor> args;
      args.emplace_back(shardmap::DType::kFloat32, Shape{37});
      float* in = args[0].data_as<float>();
      for (int i = 0; i < 37; ++i) in[i] = static_cast<float>(i % 7) - 3.0f;
      in[at] = special;
      const std::vector<float> xs(in, in + 37);
      auto out = Evaluate(b.Build(b.Unary(OpCode::kRelu, x)), std::move(args),
                          nullptr);
      ASSERT_TRUE(out.ok()) << out.status();
      const float* o = (*out)[0].data_as<float>();
      for (int i = 0; i < 37; ++i) {
        if (std::isnan(xs[i])) {
          EXPECT_TRUE(std::isnan(o[i])) << i;
          continue;
        }
        EXPECT_FALSE(std::signbit(o[i])) << i << ": " << xs[i];
        EXPECT_EQ(o[i], xs[i] > 0 ? xs[i] : 0.0f) << i << ": " << xs[i];
      }
    }
  }
}

TEST(ProgramEvaluator, LogicalOpsOnBoolAndIntegers) {
  std::mt19937 rng(5);
  NumpyBatch batch;
  for (auto [op, fn] :
       {std::pair{OpCode::kAnd, "&"}, std::pair{OpCode::kOr, "|"}}) {
    ProgramBuilder b;
    const int x = b.Param(ElemType::kFloat32, {3, 5});
    const int y = b.Param(ElemType::kFloat32, {5});
    const int zero = b.Constant(ElemType::kFloat32, {}, 0);
    const int px = b.Binary(OpCode::kGt, x, zero);
    const int py = b.Binary(OpCode::kLt, y, zero);
    const int r = b.Unary(OpCode::kNot, b.Binary(op, px, py));
    std::vector<Tensor> args;
    args.push_back(RandomTensor(shardmap::DType::kFloat32, {3, 5}, rng));
    args.push_back(RandomTensor(shardmap::DType::kFloat32, {5}, rng));
    batch.Add(absl::StrCat("bool ", OpName(op)), b.Build(r), std::move(args),
              absl::StrCat("~((a[0] > 0) ", fn, " (a[1] < 0))"));
    for (ElemType e : {ElemType::kInt32, ElemType::kInt64}) {
      ProgramBuilder c;
      const int p = c.Param(e, {2, 6}), q = c.Param(e, {2, 1});
      std::vector<Tensor> iargs;
      iargs.push_back(RandomTensor(D(e), {2, 6}, rng, -50, 50));
      iargs.push_back(RandomTensor(D(e), {2, 1}, rng, -50, 50));
      batch.Add(absl::StrCat(ElemTypeName(e), " ", OpName(op)),
                c.Build(c.Binary(op, p, q)), std::move(iargs),
                absl::StrCat("a[0] ", fn, " a[1]"));
    }
  }
  // Bool add and multiply are or and and (numpy's bool arithmetic).
  ProgramBuilder b;
  const int x = b.Param(ElemType::kInt32, {8});
  const int zero = b.Constant(ElemType::kInt32, {}, 0);
  const int p = b.Binary(OpCode::kGt, x, zero);
  const int q = b.Binary(OpCode::kLt, x, b.Constant(ElemType::kInt32, {}, 2));
  const int r = b.Binary(OpCode::kAdd, b.Binary(OpCode::kMul, p, q), p);
  std::vector<Tensor> args;
  args.push_back(RandomTensor(shardmap::DType::kInt32, {8}, rng));
  batch.Add("bool add/mul", b.Build(r), std::move(args),
            "((a[0] > 0) * (a[0] < 2)) + (a[0] > 0)");
  batch.Check();
}

TEST(ProgramEvaluator, ConvertAndSelectEqualNumpy) {
  std::mt19937 rng(6);
  NumpyBatch batch;
  for (ElemType from : kAll) {
    for (ElemType to : kAll) {
      ProgramBuilder b;
      const Shape shape = RandomShape(rng);
      const int x = b.Param(from, shape);
      std::vector<Tensor> args;
      args.push_back(RandomTensor(D(from), shape, rng, -1000, 1000));
      batch.Add(absl::StrCat(ElemTypeName(from), "->", ElemTypeName(to)),
                b.Build(b.Convert(x, to)), std::move(args),
                absl::StrCat("a[0].astype('", ElemTypeName(to), "')"),
                Rtol(to));
    }
    // To bool and back.
    ProgramBuilder b;
    const int x = b.Param(from, {9});
    std::vector<Tensor> args;
    args.push_back(RandomTensor(D(from), {9}, rng, -1, 1));
    batch.Add(
        absl::StrCat(ElemTypeName(from), "->bool->float32"),
        b.Build(b.Convert(b.Convert(x, ElemType::kBool), ElemType::kFloat32)),
        std::move(args), "a[0].astype(bool).astype(np.float32)");
  }
  for (ElemType e : kAll) {
    ProgramBuilder b;
    const int c = b.Param(ElemType::kFloat32, {4, 1});
    const int x = b.Param(e, {4, 6}), y = b.Param(e, {6});
    const int cond =
        b.Binary(OpCode::kGt, c, b.Constant(ElemType::kFloat32, {}, 0));
    std::vector<Tensor> args;
    args.push_back(RandomTensor(shardmap::DType::kFloat32, {4, 1}, rng));
    args.push_back(RandomTensor(D(e), {4, 6}, rng, -9, 9));
    args.push_back(RandomTensor(D(e), {6}, rng, -9, 9));
    batch.Add(absl::StrCat("where ", ElemTypeName(e)),
              b.Build(b.Elementwise(OpCode::kSelect, {cond, x, y})),
              std::move(args), "np.where(a[0] > 0, a[1], a[2])");
  }
  batch.Check();
}

}  // namespace
}  // namespace program
}  // namespace shardmap
