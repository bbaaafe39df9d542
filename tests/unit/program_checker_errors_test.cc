// The program checker's refusals: each rejection rule with its message,
// line, column and caret; JAX's output replication messages; the limits;
// and JAX's documentation examples checked with their specs.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "program/checker.h"
#include "tests/unit/program_test_util.h"

namespace shardmap {
namespace program {
namespace {

using namespace testing_util;

struct Rejection {
  const char* source;
  const char* message;  // what; then the source line and the caret
  int column;
};

class CheckerRejectionTest : public testing::TestWithParam<Rejection> {};

// x: float32[8,4] varying over data, w: float32[4,3] over model, i:
// int32[8,4]; the mesh is data=2, model=4.
TEST_P(CheckerRejectionTest, MessageLineColumnAndCaret) {
  const Rejection& r = GetParam();
  const std::string src = std::string("lambda x, w, i: ") + r.source;
  const std::string want = "line 1, column " + std::to_string(r.column) + ": " +
                           r.message + "\n  " + src + "\n  " +
                           std::string(r.column - 1, ' ') + "^";
  EXPECT_EQ(ErrorOf(src, {A(kF32, {8, 4}, {"data"}), A(kF32, {4, 3}, {"model"}),
                          A(kI32, {8, 4})}),
            want);
}

INSTANTIATE_TEST_SUITE_P(
    Rules, CheckerRejectionTest,
    testing::Values(
        Rejection{"psum(x @ w, 'modle')",
                  "psum: unknown mesh axis 'modle'; the mesh has 'data', "
                  "'model' (did you mean 'model'?)",
                  29},
        Rejection{"x @ x",
                  "matmul: contracting dimensions differ: float32[8,4] @ "
                  "float32[8,4] (4 vs 8)",
                  19},
        Rejection{"x + w",
                  "add: incompatible shapes for broadcasting: float32[8,4] "
                  "and float32[4,3]",
                  19},
        Rejection{"sum(x, axis=2)",
                  "sum: axis 2 is out of bounds for an array of rank 2", 29},
        Rejection{"sum(x, axis=(0, 0))", "sum: duplicate value in 'axis'", 29},
        Rejection{"transpose(x, (0, 0))",
                  "transpose: axes (0, 0) are not a permutation of the 2 "
                  "dimensions of float32[8,4]",
                  30},
        Rejection{"ppermute(x, 'model', [(0, 1), (1, 1)])",
                  "ppermute sources and destinations must be unique, got "
                  "[[0,1],[1,1]]",
                  38},
        Rejection{"ppermute(x, 'model', [(0, 4)])",
                  "ppermute: index 4 in perm [[0,4]] is outside the group of "
                  "4 devices [0, 3]",
                  38},
        Rejection{"ppermute(x, 'model', 3)",
                  "ppermute: perm must be a list or tuple of (source, "
                  "destination) pairs of Python ints, got the int 3",
                  38},
        Rejection{"x & x",
                  "bitwise_and does not accept dtype float32. Accepted dtypes "
                  "are subtypes of integer, bool.",
                  19},
        Rejection{"~x",
                  "invert does not accept dtype float32. Accepted dtypes are "
                  "subtypes of integer, bool.",
                  17},
        Rejection{"-(x > 0)", "negative does not accept dtype bool", 17},
        Rejection{"x.reshape(5, -1)",
                  "cannot reshape array of size 32 (float32[8,4]) into shape "
                  "(5, -1)",
                  19},
        Rejection{"x.reshape(-1, -1)",
                  "reshape: can only specify one unknown dimension (-1)", 27},
        Rejection{"x[8]", "index 8 is out of bounds for axis 0 with size 8",
                  18},
        Rejection{"x[::-1]",
                  "not part of the program language: negative slice steps", 18},
        Rejection{"x[0, 0, 0]",
                  "too many indices for an array of rank 2 (float32[8,4])", 18},
        Rejection{"exq(x)", "unknown name 'exq'; did you mean 'exp'?", 17},
        Rejection{"psum(x)", "psum is missing its argument 'axis_name'", 17},
        Rejection{"psum(x, 'data', foo=1)",
                  "psum has no argument 'foo'; it takes x, axis_name", 37},
        Rejection{"psum_scatter(x, 'model')",
                  "psum_scatter: reduce_scatter operand scatter dimension "
                  "size 8 must match shard count 4 (or pass tiled=true)",
                  30},
        Rejection{"all_gather(x, 'data', axis=3)",
                  "all_gather: axis 3 is out of range; it must be in [-3, 2]",
                  44},
        Rejection{"all_to_all(x, 'model', 1, 0, tiled=False) + "
                  "all_to_all(x, 'model', 0, 1)",
                  "all_to_all requires the size of the mapped axis to equal "
                  "x.shape[split_axis], but they are 4 and 8 respectively (or "
                  "pass tiled=true)",
                  84},
        Rejection{"stack([x, w])",
                  "stack: all input arrays must have the same shape, got "
                  "float32[8,4], float32[4,3]",
                  23},
        Rejection{"x.astype('float16')",
                  "astype: dtype must be one of float32, float64, int32, "
                  "int64, bool (jnp.float32 or 'float32'), got the string "
                  "'float16'",
                  26},
        Rejection{"i + 2**40",
                  "Python int 1099511627776 too large to convert to int32", 19},
        Rejection{"(x, 'a')",
                  "output 1 is the string 'a': outputs must be "
                  "arrays",
                  21},
        Rejection{"(x, x > 0)",
                  "output 1 is bool: shardmap arrays are float32, float64, "
                  "int32 or int64; use .astype(...)",
                  23},
        Rejection{"x / (1 // 0)", "integer division or modulo by zero", 24},
        Rejection{"jax.scipy.special.logsumexp(x)",
                  "jax.scipy is not part of the program language", 21},
        Rejection{"os.system('ls')",
                  "unknown name 'os' (a program has no file, network or "
                  "environment access)",
                  17},
        Rejection{"psum(x, ('data', 'data'))",
                  "psum: axis 'data' appears twice in axes ('data', 'data')",
                  25}));

TEST(CheckerRejectionTest, ArgumentCountAndMultiLinePositions) {
  EXPECT_EQ(
      ErrorOf("lambda x, w: x", {A(kF32, {1}), A(kF32, {1}), A(kF32, {1})}),
      "line 1, column 8: lambda has 2 params but 3 arguments given\n"
      "  lambda x, w: x\n         ^");
  EXPECT_EQ(
      ErrorOf("def f(x):\n  y = x.sum(0)\n  return y @ x\n", {A(kF32, {2, 3})}),
      "line 3, column 12: matmul: contracting dimensions differ: "
      "float32[3] @ float32[2,3] (3 vs 2)\n    return y @ x\n"
      "             ^");
}

TEST(CheckerReplicationTest, JaxsMessages) {
  // data=2, model=4. psum over model leaves x varying over data only.
  auto p = Check("lambda x: (psum(x, 'model'), x)",
                 {A(kF32, {4}, {"data", "model"})});
  ASSERT_TRUE(p.ok()) << p.status();
  const PartitionSpec replicated;
  const PartitionSpec by_data(std::vector<PartitionSpec::Entry>{{"data"}});
  const PartitionSpec by_both(
      std::vector<PartitionSpec::Entry>{{"data", "model"}});
  EXPECT_TRUE(CheckOutputReplication(*p, TestMesh(), {by_data, by_both}).ok());
  auto s = CheckOutputReplication(*p, TestMesh(), {by_data, by_data});
  ASSERT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "shard_map applied to the function 'program' was given out_specs "
            "which require replication which can't be statically inferred "
            "given the mesh:\n\nThe mesh given has shape (2, 4) with "
            "corresponding axis names ('data', 'model').\n\n* out_specs[1] is "
            "P('data',) which implies that the corresponding output value is "
            "replicated across mesh axis 'model', but could not infer "
            "replication over any axes\n\nCheck if these output values are "
            "meant to be replicated over those mesh axes. If not, consider "
            "revising the corresponding out_specs entries. If so, consider "
            "disabling the check by passing the check_vma=False argument to "
            "`jax.shard_map` (--no-check-rep).");
  // Two axes left out: the "only varying across" form, for each output.
  auto t = CheckOutputReplication(*p, TestMesh(), {replicated});
  ASSERT_FALSE(t.ok());
  const std::string m(t.message());
  EXPECT_NE(m.find("* out_specs[0] is P() which implies that the "
                   "corresponding output value is only varying across mesh "
                   "axes {} and not {data}, but it was inferred to be possibly "
                   "varying over {data}\n* out_specs[1] is P() which implies "
                   "that the corresponding output value is only varying across "
                   "mesh axes {} and not {data,model}, but it was inferred to "
                   "be possibly varying over {data,model}"),
            std::string::npos)
      << m;
  // Wrong number of specs.
  EXPECT_EQ(CheckOutputReplication(*p, TestMesh(),
                                   {replicated, replicated, replicated})
                .message(),
            "out_specs has 3 specs for the program's 2 outputs; give one per "
            "output or one for all");
}

TEST(CheckerLimitsTest, ResourceExhaustedNamingFigureAndLimit) {
  CheckOptions small;
  small.limits.max_instructions = 4;
  auto p = Check("lambda x: exp(x) + exp(x) + x", {A(kF32, {2})}, small);
  ASSERT_EQ(p.status().code(), absl::StatusCode::kResourceExhausted);
  // x, exp, exp and the first + fit; the second + is the fifth.
  EXPECT_EQ(std::string(p.status().message()),
            "line 1, column 27: the program needs more than 4 instructions, "
            "the limit (max_instructions)\n"
            "  lambda x: exp(x) + exp(x) + x\n                            ^");
  CheckOptions tight;
  tight.limits.max_peak_bytes = 1200;
  auto q = Check("lambda x: x @ x.T", {A(kF32, {16, 4})}, tight);
  ASSERT_EQ(q.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(std::string(q.status().message()),
            "line 1, column 13: the program holds 1536 bytes per device at "
            "once here (its peak), over the limit of 1200 bytes "
            "(max_peak_bytes)\n  lambda x: x @ x.T\n              ^");
  // Shapes too large to count are refused before anything else.
  auto r = Check("lambda x: zeros((1 << 40, 1 << 40))", {A(kF32, {1})});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  auto s = Check("lambda x: zeros((2**31, 2**31, 2**31))", {A(kF32, {1})});
  EXPECT_EQ(s.status().code(), absl::StatusCode::kResourceExhausted);
  auto big = Check("lambda x: zeros((2**20, 2**20))", {A(kF32, {1})});
  EXPECT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted)
      << big.status();
  EXPECT_EQ(std::string(big.status().message()),
            "line 1, column 11: this value, float32[1048576,1048576], needs "
            "4398046511104 bytes per device, over the limit of 4294967296 "
            "bytes (max_peak_bytes)\n"
            "  lambda x: zeros((2**20, 2**20))\n            ^");
  Limits limits;
  limits.max_source_bytes = 8;
  CheckOptions o;
  o.limits = limits;
  EXPECT_EQ(Check("lambda x: x", {A(kF32, {1})}, o).status().code(),
            absl::StatusCode::kResourceExhausted);
}

// JAX's shard_map documentation examples, with their in and out specs.
TEST(CheckerJaxExamplesTest, DocumentationExamples) {
  // Tensor-parallel MLP, mesh data=2, model=4.
  auto mlp = Check("lambda x, w1, w2: psum(relu(x @ w1) @ w2, 'model')",
                   {A(kF32, {4, 16}, {"data"}), A(kF32, {16, 8}, {"model"}),
                    A(kF32, {8, 16}, {"model"})});
  ASSERT_TRUE(mlp.ok()) << mlp.status();
  EXPECT_EQ(Out(*mlp).shape, (Shape{4, 16}));
  EXPECT_EQ(Out(*mlp).vma, Axes{"data"});
  const PartitionSpec p_data(std::vector<PartitionSpec::Entry>{{"data"}});
  EXPECT_TRUE(CheckOutputReplication(*mlp, TestMesh(), {p_data}).ok());
  EXPECT_FALSE(
      CheckOutputReplication(*mlp, TestMesh(), {PartitionSpec()}).ok());

  // Tensor-parallel GEMM as the issue writes it: rows scattered, the bias
  // replicated; x is [8, 32] globally split by columns, W [32, 16] by rows.
  auto gemm = Check(
      "lambda x, W, b: psum_scatter(x @ W, 'model', scatter_dimension=0, "
      "tiled=True) + b",
      {A(kF32, {8, 8}, {"model"}), A(kF32, {8, 16}, {"model"}), A(kF32, {16})});
  ASSERT_TRUE(gemm.ok()) << gemm.status();
  EXPECT_EQ(Out(*gemm).shape, (Shape{2, 16}));
  EXPECT_EQ(Out(*gemm).vma, Axes{"model"});
  // ... and as JAX's documentation does: columns scattered, b P('model'),
  // out P(None, 'model').
  auto doc = Check(
      "lambda x, W, b: psum_scatter(x @ W, 'model', scatter_dimension=1, "
      "tiled=True) + b",
      {A(kF32, {8, 8}, {"model"}), A(kF32, {8, 16}, {"model"}),
       A(kF32, {4}, {"model"})});
  ASSERT_TRUE(doc.ok()) << doc.status();
  EXPECT_EQ(Out(*doc).shape, (Shape{8, 4}));
  const PartitionSpec cols(std::vector<PartitionSpec::Entry>{{}, {"model"}});
  EXPECT_TRUE(CheckOutputReplication(*doc, TestMesh(), {cols}).ok());

  // Data-parallel least-squares gradient: X and y split over data, w
  // replicated; the psum'd gradient is replicated (out P()).
  auto grad =
      Check("lambda X, w, y: psum(X.T @ (X @ w - y), 'data')",
            {A(kF32, {5, 3}, {"data"}), A(kF32, {3}), A(kF32, {5}, {"data"})});
  ASSERT_TRUE(grad.ok()) << grad.status();
  EXPECT_EQ(Out(*grad).shape, (Shape{3}));
  EXPECT_EQ(Out(*grad).vma, Axes{});
  EXPECT_TRUE(
      CheckOutputReplication(*grad, TestMesh(), {PartitionSpec()}).ok());

  // Normalising by a global sum.
  auto norm =
      Check("lambda x: x / psum(sum(x), 'data')", {A(kF32, {6}, {"data"})});
  ASSERT_TRUE(norm.ok()) << norm.status();
  EXPECT_EQ(Out(*norm).shape, (Shape{6}));
  EXPECT_EQ(Out(*norm).vma, Axes{"data"});
  EXPECT_EQ(Out(*norm).elem, kF32);
}

}  // namespace
}  // namespace program
}  // namespace shardmap
