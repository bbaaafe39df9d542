// The program checker: shapes of every operation against numpy (generated
// by program_shapes_gen.py), dtypes against JAX's promotion lattice
// (encoded here independently as a graph), varying axes of every
// collective, costs, each rejection with its message and caret, the
// output replication rule, the limits, and JAX's documentation examples.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "program/checker.h"

namespace shardmap {
namespace program {
namespace {

using Shape = std::vector<int64_t>;
using Axes = std::set<std::string>;
constexpr ElemType kF32 = ElemType::kFloat32, kF64 = ElemType::kFloat64,
                   kI32 = ElemType::kInt32, kI64 = ElemType::kInt64,
                   kBool = ElemType::kBool;

ArgType A(ElemType e, Shape s, Axes vma = {}) {
  ArgType a;
  a.elem = e;
  a.block_shape = std::move(s);
  a.vma = std::move(vma);
  return a;
}

const Mesh& TestMesh() {
  static const Mesh* mesh = new Mesh(*Mesh::Parse("data=2,model=4"));
  return *mesh;
}

absl::StatusOr<Program> Check(const std::string& src,
                              const std::vector<ArgType>& args,
                              CheckOptions options = CheckOptions()) {
  return CheckProgram(src, TestMesh(), args, options);
}

std::string ErrorOf(const std::string& src, const std::vector<ArgType>& args) {
  auto p = Check(src, args);
  if (p.ok()) return "OK";
  return std::string(p.status().message());
}

const ValueType& Out(const Program& p, int k = 0) {
  return p.instrs[p.outputs[k]].type;
}

// The first instruction with `op`, or null.
const Instr* Find(const Program& p, OpCode op) {
  for (const Instr& in : p.instrs) {
    if (in.op == op) return &in;
  }
  return nullptr;
}

struct ShapeCase {
  const char* source;
  Shape x, y, z, expected;
};

const ShapeCase kShapeCases[] = {
#include "tests/unit/program_shapes_cases.inc"
};

TEST(CheckerShapesTest, EveryOperationAsNumpy) {
  for (const ShapeCase& c : kShapeCases) {
    auto p = Check(c.source, {A(kF32, c.x), A(kF32, c.y), A(kF32, c.z)});
    ASSERT_TRUE(p.ok()) << c.source << ": " << p.status();
    EXPECT_EQ(Out(*p).shape, c.expected) << c.source;
  }
}

// JAX's type promotion lattice (jax/_src/dtypes.py), with the unsigned and
// half types the program language lacks kept so the graph is JAX's own:
// the least upper bound is computed over it, independently of the
// checker's chain.
class Lattice {
 public:
  Lattice() {
    const std::vector<std::pair<std::string, std::string>> edges = {
        {"b1", "i*"},    {"i*", "u8"},   {"i*", "i8"},   {"u8", "u16"},
        {"u8", "i16"},   {"u16", "u32"}, {"u16", "i32"}, {"u32", "u64"},
        {"u32", "i64"},  {"i8", "i16"},  {"i16", "i32"}, {"i32", "i64"},
        {"i64", "f*"},   {"u64", "f*"},  {"f*", "bf16"}, {"f*", "f16"},
        {"bf16", "f32"}, {"f16", "f32"}, {"f32", "f64"}};
    for (const auto& [a, b] : edges) up_[a].insert(b), up_[b];
  }
  std::set<std::string> UpperBounds(const std::string& t) const {
    std::set<std::string> seen{t};
    std::vector<std::string> todo{t};
    while (!todo.empty()) {
      const std::string x = todo.back();
      todo.pop_back();
      for (const std::string& y : up_.at(x)) {
        if (seen.insert(y).second) todo.push_back(y);
      }
    }
    return seen;
  }
  std::string Join(const std::string& a, const std::string& b) const {
    std::set<std::string> common;
    const std::set<std::string> ua = UpperBounds(a), ub = UpperBounds(b);
    std::set_intersection(ua.begin(), ua.end(), ub.begin(), ub.end(),
                          std::inserter(common, common.begin()));
    for (const std::string& c : common) {
      if (UpperBounds(c) == common) return c;
    }
    return "none";
  }

 private:
  std::map<std::string, std::set<std::string>> up_;
};

TEST(CheckerTypesTest, PromotionIsJaxsLatticeJoin) {
  const Lattice lattice;
  // The program language's types as lattice nodes; how each is written as
  // an operand; the elem a node gives (weak types take JAX's defaults).
  struct T {
    std::string node;
    ElemType elem;        // an argument of this elem, or
    std::string literal;  // a Python literal
  };
  const std::vector<T> types = {{"b1", kBool, ""},   {"i32", kI32, ""},
                                {"i64", kI64, ""},   {"f32", kF32, ""},
                                {"f64", kF64, ""},   {"i*", kI32, "2"},
                                {"f*", kF32, "2.5"}, {"b1", kBool, "True"}};
  const std::map<std::string, ElemType> node_elem = {
      {"b1", kBool}, {"i*", kI32},  {"i32", kI32}, {"i64", kI64},
      {"f*", kF32},  {"f32", kF32}, {"f64", kF64}};
  for (const T& a : types) {
    for (const T& b : types) {
      if (!a.literal.empty() && !b.literal.empty()) continue;
      std::vector<ArgType> args;
      std::string ea = a.literal, eb = b.literal;
      if (ea.empty()) args.push_back(A(a.elem, {3})), ea = "a";
      if (eb.empty()) args.push_back(A(b.elem, {3})), eb = "b";
      const std::string params = args.size() == 2 ? "a, b"
                                 : ea == "a"      ? "a"
                                                  : "b";
      const std::string src = "lambda " + params + ": maximum(" + ea + ", " +
                              eb + ").astype(jnp.float32)";
      auto p = Check(src, args);
      ASSERT_TRUE(p.ok()) << src << ": " << p.status();
      const Instr* max = Find(*p, OpCode::kMax);
      ASSERT_NE(max, nullptr) << src;
      const std::string join = lattice.Join(a.node, b.node);
      EXPECT_EQ(max->type.elem, node_elem.at(join))
          << a.node << " v " << b.node << " = " << join << " in " << src;
    }
  }
}

TEST(CheckerTypesTest, InexactOpsIntegerLiteralsAndConversions) {
  struct Case {
    const char* src;
    ElemType arg;
    ElemType out;
  };
  const Case cases[] = {
      {"lambda a: a / a", kI32, kF32},  // true division of ints
      {"lambda a: a / a", kI64, kF64},
      {"lambda a: (a / a)", kBool, kF32},
      {"lambda a: a / 2", kI32, kF32},
      {"lambda a: mean(a)", kI64, kF64},
      {"lambda a: mean(a)", kI32, kF32},
      {"lambda a: exp(a)", kI32, kF32},
      {"lambda a: sqrt(a)", kBool, kF32},
      {"lambda a: a + 1", kBool, kI32},  // weak int meets bool
      {"lambda a: a * 2.0", kI32, kF32},
      {"lambda a: a * 2.0", kI64, kF32},
      {"lambda a: a * 2.0", kF64, kF64},
      {"lambda a: a + 1", kI64, kI64},
      {"lambda a: sum(a)", kBool, kI32},
      {"lambda a: argmax(a)", kF64, kI32},
      {"lambda a: a // 2", kBool, kI32},
      {"lambda a: (a + a).astype(jnp.int64)", kBool, kI64},
      {"lambda a: a.astype('float64')", kI32, kF64},
      {"lambda a: jnp.float32(a)", kI64, kF32},
      {"lambda a: relu(a)", kBool, kI32},
      {"lambda a: abs(a) * 1", kBool, kI32},
      {"lambda a: pmean(a, 'data')", kI32, kF32},
      {"lambda a: psum(a > 0, 'data')", kF32, kI32},
      {"lambda a: where(a, 1, 2.0)", kBool, kF32},
      {"lambda a: zeros(3)", kI32, kF32},
      {"lambda a: arange(3)", kI32, kI32},
      {"lambda a: full((2,), 1)", kF64, kI32},
      {"lambda a: zeros_like(a)", kI64, kI64},
  };
  for (const Case& c : cases) {
    auto p = Check(c.src, {A(c.arg, {2, 3})});
    ASSERT_TRUE(p.ok()) << c.src << ": " << p.status();
    EXPECT_EQ(Out(*p).elem, c.out) << c.src << " of " << ElemTypeName(c.arg);
  }
}

TEST(CheckerTypesTest, OperandsAreConvertedToTheElemTheOpComputesIn) {
  auto p = Check("lambda a, b: a + b", {A(kI32, {3}), A(kF64, {3})});
  ASSERT_TRUE(p.ok()) << p.status();
  const Instr& add = p->instrs[p->outputs[0]];
  ASSERT_EQ(add.op, OpCode::kAdd);
  for (int o : add.operands) EXPECT_EQ(p->instrs[o].type.elem, kF64);
  EXPECT_EQ(p->instrs[add.operands[0]].op, OpCode::kConvert);
  EXPECT_EQ(p->instrs[add.operands[1]].op, OpCode::kParam);
  // bool + bool is logical or, bool * bool logical and (as jnp).
  auto q = Check("lambda a, b: (a + b, a * b)[0].astype(int)",
                 {A(kBool, {3}), A(kBool, {3})});
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_NE(Find(*q, OpCode::kOr), nullptr);
}

TEST(CheckerFoldTest, PythonScalarsFoldAtCheckTime) {
  auto p = Check(
      "lambda x: x.reshape(axis_size('model') * 2, -1) * (2 ** 3 "
      "// 3)",
      {A(kF32, {4, 6})});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(Out(*p).shape, (Shape{8, 3}));
  const Instr& mul = p->instrs[p->outputs[0]];
  EXPECT_EQ(p->instrs[mul.operands[1]].attrs.value, 2);
  // psum of a Python constant is n * c; pmean gives it back as a float.
  auto q = Check(
      "lambda x: (psum(3, 'model') + x, pmean(3, ('data', "
      "'model')) + x)",
      {A(kI32, {2})});
  ASSERT_TRUE(q.ok()) << q.status();
  const Instr& add0 = q->instrs[q->outputs[0]];
  EXPECT_EQ(q->instrs[add0.operands[0]].attrs.int_value, 12);
  EXPECT_EQ(Out(*q, 0).elem, kI32);
  const Instr& add1 = q->instrs[q->outputs[1]];
  EXPECT_EQ(q->instrs[add1.operands[0]].attrs.value, 3.0);
  EXPECT_EQ(Out(*q, 1).elem, kF32);
  // x.shape, x.ndim and x.dtype are static.
  auto r = Check("lambda x: zeros((x.shape[1], x.ndim), dtype=x.dtype)",
                 {A(kI64, {5, 7})});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Out(*r).shape, (Shape{7, 2}));
  EXPECT_EQ(Out(*r).elem, kI64);
}

TEST(CheckerVmaTest, EveryCollective) {
  const Axes dm = {"data", "model"};
  struct Case {
    const char* src;
    Axes in, out;
    Shape shape;
  };
  const Case cases[] = {
      {"lambda x: psum(x, 'model')", dm, {"data"}, {4, 8}},
      {"lambda x: pmean(x, ('data', 'model'))", dm, {}, {4, 8}},
      {"lambda x: pmax(x, 'data')", {"data"}, {}, {4, 8}},
      {"lambda x: pmin(x, 'model')", {}, {}, {4, 8}},  // invariant in: fine
      {"lambda x: all_gather(x, 'model')", {"data"}, dm, {4, 4, 8}},
      {"lambda x: all_gather(x, 'model', axis=1, tiled=True)",
       {},
       {"model"},
       {4, 32}},
      {"lambda x: all_gather(x, ('data', 'model'), axis=-1)",
       {},
       dm,
       {4, 8, 8}},
      {"lambda x: psum_scatter(x, 'model', scatter_dimension=1, tiled=True)",
       {"data"},
       dm,
       {4, 2}},
      {"lambda x: psum_scatter(x, 'model')", {}, {"model"}, {8}},
      {"lambda x: ppermute(x, 'model', [(0, 1), (1, 2), (2, 3), (3, 0)])",
       {},
       {"model"},
       {4, 8}},
      {"lambda x: all_to_all(x, 'model', 0, 1, tiled=True)",
       {"data"},
       dm,
       {1, 32}},
      {"lambda x: all_to_all(x, 'model', 0, 1)", {}, {"model"}, {8, 4}},
      {"lambda x: x + axis_index('model')", {"data"}, dm, {4, 8}},
      {"lambda x: x * axis_size('model')", {"data"}, {"data"}, {4, 8}},
      {"lambda x: x + zeros_like(x)", {"data"}, {"data"}, {4, 8}},
      {"lambda x: psum(psum(x, 'data'), 'data')", dm, {"model"}, {4, 8}},
      {"lambda x: psum(all_gather(x, 'data'), 'data')", {}, {}, {2, 4, 8}},
  };
  for (const Case& c : cases) {
    auto p = Check(c.src, {A(kF32, {4, 8}, c.in)});
    ASSERT_TRUE(p.ok()) << c.src << ": " << p.status();
    EXPECT_EQ(Out(*p).vma, c.out) << c.src;
    EXPECT_EQ(Out(*p).shape, c.shape) << c.src;
  }
  // Constants are invariant; axis_index is an int32 scalar varying over
  // its axes.
  auto q = Check("lambda x: (ones(3) + 1, axis_index(('data', 'model')))",
                 {A(kF32, {1}, dm)});
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(Out(*q, 0).vma, Axes{});
  EXPECT_EQ(Out(*q, 1).vma, dm);
  EXPECT_EQ(Out(*q, 1).elem, kI32);
  EXPECT_EQ(Out(*q, 1).shape, Shape{});
  // check_vma off: nothing is tracked.
  CheckOptions off;
  off.check_vma = false;
  auto r = Check("lambda x: all_gather(x, 'model') + axis_index('data')",
                 {A(kF32, {4}, dm)}, off);
  ASSERT_TRUE(r.ok()) << r.status();
  for (const Instr& in : r->instrs) EXPECT_TRUE(in.type.vma.empty());
}

TEST(CheckerCostTest, FlopsAndRingBytes) {
  // y: float32[8,6] = 192 bytes; model has 4 devices, data 2.
  auto p = Check(
      "def f(x, w):\n"
      "  y = x @ w\n"
      "  a = psum(y, 'model')\n"
      "  b = all_gather(y, 'model')\n"
      "  c = psum_scatter(y, ('data', 'model'), tiled=True)\n"
      "  d = ppermute(y, 'data', [(0, 1), (1, 0)])\n"
      "  e = all_to_all(y, 'model', 0, 1, tiled=True)\n"
      "  return a, b, c, d, e, exp(y).sum()\n",
      {A(kF32, {8, 8}), A(kF32, {8, 6})});
  ASSERT_TRUE(p.ok()) << p.status();
  auto at = [&](int k) { return p->instrs[p->outputs[k]]; };
  EXPECT_EQ(Find(*p, OpCode::kMatMul)->flops, 2 * 8 * 6 * 8);
  EXPECT_EQ(at(0).bytes_sent, 2 * 3 * 192 / 4);  // 2 (n-1)/n B
  EXPECT_EQ(at(0).bytes_received, 2 * 3 * 192 / 4);
  EXPECT_EQ(at(1).bytes_sent, 3 * 192);  // (n-1) B
  EXPECT_EQ(at(1).bytes_received, 3 * 192);
  EXPECT_EQ(at(2).bytes_sent, 7 * 192 / 8);      // (n-1)/n B, n = 8
  EXPECT_EQ(at(3).bytes_sent, 192);              // B
  EXPECT_EQ(at(4).bytes_received, 3 * 192 / 4);  // (n-1)/n B
  EXPECT_EQ(at(5).flops, 48);                    // the sum: elements reduced
  EXPECT_EQ(Find(*p, OpCode::kExp)->flops, 48);
  EXPECT_EQ(Find(*p, OpCode::kExp)->bytes_sent, 0);
}

TEST(CheckerCostTest, PeakBytesFreesAfterLastUse) {
  auto p = Check("def f(x, w):\n  t = x * 2\n  u = exp(t)\n  return u @ w\n",
                 {A(kF32, {4, 4}), A(kF32, {4, 1})});
  ASSERT_TRUE(p.ok()) << p.status();
  // x (64 B) and w (16 B) from the start; the constant 2 (4 B) and t
  // (64 B): 148, the peak; x and the constant die at t: 80; u (64 B):
  // 144; t dies: 80; u @ w (16 B): 96.
  EXPECT_EQ(p->peak_bytes, 148);
  // An unused parameter counts from the start, then is freed.
  auto q = Check("lambda x, big: x + 1", {A(kF32, {1}), A(kF64, {100})});
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->peak_bytes, 4 + 800);
}

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
  tight.limits.max_peak_bytes = 1000;
  auto q = Check("lambda x: x @ x.T", {A(kF32, {16, 4})}, tight);
  ASSERT_EQ(q.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(std::string(q.status().message()),
            "line 1, column 13: the program holds 1536 bytes per device at "
            "once here (its peak), over the limit of 1000 bytes "
            "(max_peak_bytes)\n  lambda x: x @ x.T\n              ^");
  // Shapes too large to count are refused before anything else.
  auto r = Check("lambda x: zeros((1 << 40, 1 << 40))", {A(kF32, {1})});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  auto s = Check("lambda x: zeros((2**31, 2**31, 2**31))", {A(kF32, {1})});
  EXPECT_EQ(s.status().code(), absl::StatusCode::kResourceExhausted);
  auto big = Check("lambda x: zeros((2**20, 2**20))", {A(kF32, {1})});
  EXPECT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted)
      << big.status();
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
