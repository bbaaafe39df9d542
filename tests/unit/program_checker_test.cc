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
#include "program/program_cache.h"
#include "tests/unit/program_test_util.h"

namespace shardmap {
namespace program {
namespace {

using namespace testing_util;

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
      // A weak float with int64 is made float64 (types.cc: the JAX that
      // has int64 is x64); every other weak float is float32.
      const bool wide = join == "f*" && (a.node == "i64" || b.node == "i64");
      EXPECT_EQ(max->type.elem, wide ? kF64 : node_elem.at(join))
          << a.node << " v " << b.node << " = " << join << " in " << src;
    }
  }
}

TEST(CheckerTypesTest, AWeakFloatMadeFloat64ByInt64StaysWeak) {
  // int64 * 2.0 is float64, but still weak: a float32 array wins after it,
  // whichever way the operands group (JAX with x64).
  struct Case {
    const char* src;
    ElemType out;
  };
  const Case cases[] = {
      {"lambda i, f: (i * 2.0) + f", kF32},
      {"lambda i, f: i * (2.0 + f)", kF32},
      {"lambda i, f: (2.0 * i) + f", kF32},
      {"lambda i, f: i * 2.0", kF64},
      {"lambda i, f: 3.0 + i * 2.0", kF64},
      {"lambda i, f: (i * 2.0) + (i + 1)", kF64},
  };
  for (const Case& c : cases) {
    auto p = Check(c.src, {A(kI64, {2}), A(kF32, {2})});
    ASSERT_TRUE(p.ok()) << c.src << ": " << p.status();
    EXPECT_EQ(Out(*p).elem, c.out) << c.src;
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
      {"lambda a: a * 2.0", kI64, kF64},
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
  // Module spellings, numpy's constants, and dtypes as values.
  auto m = Check(
      "lambda x: jax.lax.psum(jax.numpy.exp(x) * jnp.pi, 'data') "
      "+ lax.max(x, np.inf) + jax.nn.relu(x).astype(jnp.bool)",
      {A(kF32, {2})});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(Out(*m).elem, kF32);
  const Instr* times = Find(*m, OpCode::kMul);
  ASSERT_NE(times, nullptr);
  EXPECT_FLOAT_EQ(m->instrs[times->operands[1]].attrs.value, 3.14159265);
  // x.shape, x.ndim and x.dtype are static.
  auto sl = Check("lambda x: x.reshape(x.shape[:1] + (-1,) + x.shape[-1:])",
                  {A(kF32, {2, 3, 4, 5})});
  ASSERT_TRUE(sl.ok()) << sl.status();
  EXPECT_EQ(Out(*sl).shape, (Shape{2, 12, 5}));
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

}  // namespace
}  // namespace program
}  // namespace shardmap

namespace shardmap {
namespace program {
namespace {

TEST(CheckerLimitsTest, TuplesAreBoundedByTheirNestedSize) {
  // Each `t = (t, t)` doubles the value: 20 lines would be a million
  // nested values; the checker refuses where the bound is crossed.
  std::string src = "def f(x):\n    t = (1, 1)\n";
  for (int i = 0; i < 20; ++i) src += "    t = (t, t)\n";
  src += "    return x\n";
  auto p = CheckProgram(src, TestMesh(), {A(ElemType::kFloat32, {2})},
                        CheckOptions());
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(p.status().message().find("max_tuple_nodes"), std::string::npos)
      << p.status();
  EXPECT_NE(p.status().message().find("line 17"), std::string::npos)
      << p.status();
}

TEST(ProgramCacheTest, KeysOnEverythingTheCheckDependsOnAndEvictsTheOldest) {
  ProgramCache cache(2);
  const std::vector<ArgType> f32 = {A(ElemType::kFloat32, {4})};
  const std::vector<ArgType> i32 = {A(ElemType::kInt32, {4})};
  CheckOptions on, off;
  off.check_vma = false;
  auto a = cache.Check("lambda x: x * 2", TestMesh(), f32, on);
  ASSERT_TRUE(a.ok()) << a.status();
  // The same call comes from the cache; another dtype or check_vma does not.
  EXPECT_EQ(a->get(),
            cache.Check("lambda x: x * 2", TestMesh(), f32, on)->get());
  auto b = cache.Check("lambda x: x * 2", TestMesh(), i32, on);
  ASSERT_TRUE(b.ok());
  EXPECT_NE(a->get(), b->get());
  EXPECT_EQ((*b)->instrs.back().type.elem, ElemType::kInt32);
  auto c = cache.Check("lambda x: x * 2", TestMesh(), f32, off);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(a->get(), c->get());
  EXPECT_EQ(cache.size(), 2u);  // the first one was evicted
  EXPECT_NE(a->get(),
            cache.Check("lambda x: x * 2", TestMesh(), f32, on)->get());
  // Failures are not kept.
  EXPECT_FALSE(cache.Check("lambda x: x +", TestMesh(), f32, on).ok());
  EXPECT_EQ(cache.size(), 2u);
}

// JAX's empty axis tuple: psum(x, ()) is x; pmean(x, ()) is x / 1 (an
// integer becomes floating); axis_size(()) is 1; all_gather over () stacks
// one block.
TEST(CheckerAxesTest, CollectivesOverNoAxes) {
  const std::vector<ArgType> i32 = {A(ElemType::kInt32, {4}, {"data"})};
  auto psum = Check("lambda x: psum(x, ())", i32);
  ASSERT_TRUE(psum.ok()) << psum.status();
  EXPECT_EQ(psum->instrs[psum->outputs[0]].type.elem, ElemType::kInt32);
  EXPECT_EQ(psum->instrs[psum->outputs[0]].type.vma, Axes{"data"});
  auto pmean = Check("lambda x: pmean(x, ())", i32);
  ASSERT_TRUE(pmean.ok()) << pmean.status();
  EXPECT_EQ(pmean->instrs[pmean->outputs[0]].type.elem, ElemType::kFloat32);
  auto gather = Check("lambda x: all_gather(x, ()) * axis_size(())", i32);
  ASSERT_TRUE(gather.ok()) << gather.status();
  EXPECT_EQ(gather->instrs[gather->outputs[0]].type.shape,
            (std::vector<int64_t>{1, 4}));
}

// A partial-manual job (JAX's axis_names): collectives, axis_index and
// axis_size may name only the manual axes, in JAX's words.
TEST(CheckerAxesTest, AutoAxesAreUnbound) {
  CheckOptions options;
  options.manual_axes = {"data"};
  const std::vector<ArgType> f32 = {A(ElemType::kFloat32, {4}, {"data"})};
  EXPECT_TRUE(Check("lambda x: psum(x, 'data')", f32, options).ok());
  for (const char* src : {"lambda x: psum(x, 'model')",
                          "lambda x: x * axis_index(('data', 'model'))",
                          "lambda x: x * axis_size('model')"}) {
    auto p = Check(src, f32, options);
    EXPECT_FALSE(p.ok()) << src;
    EXPECT_NE(p.status().message().find(
                  "Found an unbound axis name: model. To fix this, please "
                  "call "),
              std::string::npos)
        << p.status();
  }
}

}  // namespace
}  // namespace program
}  // namespace shardmap
