// Tests of the built-in functions without collectives (identity, add, mul,
// scale, relu, matmul, sum), called as a worker calls them: Find, CheckCall,
// then the kernel.
//
// The reference is numpy, run once per test binary through Debian's
// /usr/bin/python3 (or $SHARDMAP_PYTHON): the C++ side lists the cases
// (function, kwargs, argument dtypes and shapes), Python draws random
// inputs, computes numpy's result and prints both as text with repr
// precision, and each case parses that back into Tensors. The output is
// cached in TempDir, keyed by a hash of the script and the cases.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/tensor.h"
#include "wire/signature.h"
#include "worker/functions/function_registry.h"
#include "worker/shard_executor.h"

namespace shardmap {
namespace {

constexpr char kReferenceScript[] = R"PY(
import json, sys, warnings
import numpy as np

warnings.simplefilter("ignore")
np.seterr(all="ignore")
rng = np.random.default_rng(20240601)

def make(dtype, shape, fill):
    dt = np.dtype(dtype)
    if dt.kind == "f":
        x = rng.uniform(-3, 3, size=shape).astype(dt)
        if fill == "special":
            flat = x.reshape(-1)
            for i, v in enumerate([np.nan, -np.inf, np.inf, -0.0, -1.0]):
                if i < flat.size:
                    flat[i] = v
        return np.asarray(x)
    info = np.iinfo(dt)
    lo, hi = (info.min, info.max) if fill == "big" else (-50, 50)
    return np.asarray(rng.integers(lo, hi, size=shape, dtype=dt, endpoint=True))

def reference(fn, kw, args):
    x = args[0]
    if fn == "identity":
        return x
    if fn == "add":
        return np.add(*args)
    if fn == "mul":
        return np.multiply(*args)
    if fn == "relu":
        return np.maximum(x, np.zeros((), x.dtype))  # propagates NaN
    if fn == "matmul":
        if x.dtype == np.float32:
            return np.matmul(*(a.astype(np.float64) for a in args)).astype(np.float32)
        return np.matmul(*args)
    if fn == "sum":
        axis = kw.get("axis")
        axis = tuple(axis) if isinstance(axis, list) else axis
        acc = np.float64 if x.dtype.kind == "f" else x.dtype
        return np.sum(x, axis=axis, keepdims=kw.get("keepdims", False),
                      dtype=acc).astype(x.dtype)
    if fn == "scale":
        alpha = kw["alpha"]
        if x.dtype.kind == "f" or isinstance(alpha, int):
            return x * x.dtype.type(alpha)
        f = np.float32 if x.dtype == np.int32 else np.float64
        return x.astype(f) * f(alpha)
    raise ValueError(fn)

def emit(tag, a):
    a = np.asarray(a)
    print(tag, a.dtype.name, a.ndim, *a.shape)
    if a.dtype.kind == "f":
        print(" ".join(repr(float(v)) for v in a.reshape(-1)))
    else:
        print(" ".join(str(int(v)) for v in a.reshape(-1)))

for line in open(sys.argv[1]):
    name, fn, kwargs, fill, argspec = line.rstrip("\n").split("\t")
    args = []
    for a in argspec.split(";"):
        dtype, dims = a.split(":")
        args.append(make(dtype, [int(d) for d in dims.split(",") if d], fill))
    print("case", name)
    for a in args:
        emit("arg", a)
    emit("out", reference(fn, json.loads(kwargs), args))
print("done")
)PY";

struct ArgSpec {
  std::string dtype;
  Shape shape;
};

struct CaseSpec {
  std::string name;
  std::string fn;
  std::string kwargs;  // JSON text
  std::vector<ArgSpec> args;
  std::string fill = "-";  // "special" (NaN, inf, -0.0) or "big" (full range)
};

std::ostream& operator<<(std::ostream& os, const CaseSpec& c) {
  os << c.fn << "(";
  for (const ArgSpec& a : c.args) os << a.dtype << ShapeTuple(a.shape) << " ";
  return os << "; " << c.kwargs << ") fill=" << c.fill;
}

std::vector<CaseSpec> AllCases() {
  using Shapes = std::vector<Shape>;
  const std::vector<std::string> dtypes = {"float32", "float64", "int32",
                                           "int64"};
  std::vector<CaseSpec> cases;
  auto add = [&](const std::string& fn, const Shapes& shapes,
                 const std::string& kwargs, const std::string& fill = "-") {
    for (const std::string& dtype : dtypes) {
      CaseSpec c{absl::StrCat(fn, "_", cases.size(), "_", dtype),
                 fn,
                 kwargs,
                 {},
                 fill};
      for (const Shape& s : shapes) c.args.push_back({dtype, s});
      cases.push_back(c);
    }
  };
  for (const Shapes& s : {Shapes{{2, 3}}, Shapes{{}}, Shapes{{0, 4}}}) {
    add("identity", s, "{}");
  }
  const std::vector<Shapes> binary = {{{2, 3}, {2, 3}},
                                      {{17, 33}, {17, 33}},
                                      {{3, 1}, {1, 4}},
                                      {{2, 3}, {3}},
                                      {{}, {2, 3}},
                                      {{2, 3}, {}},
                                      {{}, {}},
                                      {{1}, {5}},
                                      {{0, 3}, {1, 3}},
                                      {{5, 0}, {5, 1}},
                                      {{0}, {}},
                                      {{4, 1, 3}, {2, 1}},
                                      {{2, 1, 4}, {3, 1}},
                                      {{1, 1}, {2, 3}}};
  for (const char* fn : {"add", "mul"}) {
    for (const Shapes& s : binary) add(fn, s, "{}");
    add(fn, {{64}, {64}}, "{}", "big");  // integer overflow wraps around
    add(fn, {{8, 1}, {8}}, "{}", "big");
  }
  for (const char* kw :
       {R"({"alpha": 2.5})", R"({"alpha": 3})", R"({"alpha": -2})",
        R"({"alpha": 2.0})", R"({"alpha": 0})"}) {
    for (const Shapes& s : {Shapes{{3, 4}}, Shapes{{}}, Shapes{{0}}}) {
      add("scale", s, kw);
    }
  }
  add("scale", {{32}}, R"({"alpha": 7})", "big");
  for (const Shapes& s :
       {Shapes{{4, 5}}, Shapes{{3}}, Shapes{{}}, Shapes{{0}}}) {
    add("relu", s, "{}", "special");
  }
  add("relu", {{40}}, "{}");
  const std::vector<Shapes> matmul = {
      {{3, 4}, {4, 5}},    {{4}, {4, 5}},    {{3, 4}, {4}},
      {{4}, {4}},          {{0, 4}, {4, 5}}, {{3, 0}, {0, 5}},
      {{3, 4}, {4, 0}},    {{0}, {0}},       {{0}, {0, 3}},
      {{3, 0}, {0}},       {{1, 1}, {1, 1}}, {{16, 33}, {33, 9}},
      {{40, 70}, {70, 50}}};
  for (const Shapes& s : matmul) add("matmul", s, "{}");
  for (const char* kw :
       {"{}", R"({"axis": null})", R"({"axis": 0})", R"({"axis": 1})",
        R"({"axis": 2})", R"({"axis": -1})", R"({"axis": -3})",
        R"({"axis": [0, 2]})", R"({"axis": [-1, 0]})", R"({"axis": []})",
        R"({"axis": [2, 0, 1]})", R"({"keepdims": true})",
        R"({"axis": 1, "keepdims": true})",
        R"({"axis": [0, -1], "keepdims": true})"}) {
    add("sum", {{3, 4, 5}}, kw);
  }
  add("sum", {{}}, "{}");
  add("sum", {{}}, R"({"keepdims": true})");
  add("sum", {{}}, R"({"axis": []})");
  add("sum", {{7}}, R"({"axis": 0})");
  for (const char* kw :
       {"{}", R"({"axis": 0})", R"({"axis": 1})", R"({"keepdims": true})"}) {
    add("sum", {{0, 3}}, kw);
    add("sum", {{4, 0}}, kw);
  }
  add("sum", {{1000}}, "{}", "big");  // int overflow wraps around
  return cases;
}

struct Reference {
  std::vector<Tensor> args;
  Tensor expected;
};

// Reads "<tag> dtype ndim dims..." then a line of values.
Tensor ReadTensor(std::istream& in, const std::string& header) {
  std::istringstream h(header);
  std::string tag, dtype_name;
  int ndim = 0;
  h >> tag >> dtype_name >> ndim;
  Shape shape(ndim);
  for (int64_t& d : shape) h >> d;
  DType dtype = ParseDType(dtype_name).value();
  Tensor t(dtype, shape);
  std::string values;
  std::getline(in, values);
  std::istringstream v(values);
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    std::string s;
    v >> s;
    switch (dtype) {
      case DType::kFloat32:
        t.data_as<float>()[i] = std::strtod(s.c_str(), nullptr);
        break;
      case DType::kFloat64:
        t.data_as<double>()[i] = std::strtod(s.c_str(), nullptr);
        break;
      case DType::kInt32:
        t.data_as<int32_t>()[i] = std::strtoll(s.c_str(), nullptr, 10);
        break;
      case DType::kInt64:
        t.data_as<int64_t>()[i] = std::strtoll(s.c_str(), nullptr, 10);
        break;
    }
  }
  return t;
}

std::string SpecText() {
  std::string text;
  for (const CaseSpec& c : AllCases()) {
    std::vector<std::string> args;
    for (const ArgSpec& a : c.args) {
      args.push_back(absl::StrCat(a.dtype, ":", absl::StrJoin(a.shape, ",")));
    }
    absl::StrAppend(&text, c.name, "\t", c.fn, "\t", c.kwargs, "\t", c.fill,
                    "\t", absl::StrJoin(args, ";"), "\n");
  }
  return text;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// numpy's output for every case. gtest_discover_tests runs each test in its
// own process, so the output is cached in TempDir under a hash of the
// script and the cases, published with an atomic rename.
absl::StatusOr<std::string> NumpyOutput() {
  const std::string spec = SpecText();
  const std::string key = absl::StrCat(
      std::hash<std::string>()(absl::StrCat(kReferenceScript, spec)));
  const std::string dir = ::testing::TempDir();
  const std::string cache = absl::StrCat(dir, "/functions_test_ref_", key);
  std::string text = ReadFile(cache);
  if (absl::EndsWith(text, "done\n")) return text;

  const std::string stem = absl::StrCat(dir, "/functions_test_", getpid());
  std::ofstream(stem + ".py") << kReferenceScript;
  std::ofstream(stem + ".tsv") << spec;
  const char* env = std::getenv("SHARDMAP_PYTHON");
  const std::string cmd =
      absl::StrCat(env != nullptr ? env : "/usr/bin/python3", " ", stem, ".py ",
                   stem, ".tsv > ", stem, ".out");
  const int rc = std::system(cmd.c_str());
  text = ReadFile(stem + ".out");
  std::remove((stem + ".py").c_str());
  std::remove((stem + ".tsv").c_str());
  if (rc != 0 || !absl::EndsWith(text, "done\n")) {
    std::remove((stem + ".out").c_str());
    return absl::InternalError(absl::StrCat(
        "numpy reference failed (exit ", rc, ") running '", cmd,
        "'; it needs Python with numpy ($SHARDMAP_PYTHON picks another)"));
  }
  std::rename((stem + ".out").c_str(), cache.c_str());
  return text;
}

// The parsed reference cases, computed once per process.
const std::map<std::string, Reference>& References(std::string* error) {
  static std::string* failure = new std::string;
  static auto* refs = [] {
    auto* out = new std::map<std::string, Reference>;
    absl::StatusOr<std::string> text = NumpyOutput();
    if (!text.ok()) {
      *failure = std::string(text.status().message());
      return out;
    }
    std::istringstream in(*text);
    std::string line, name;
    while (std::getline(in, line)) {
      if (line.rfind("case ", 0) == 0) {
        name = line.substr(5);
      } else if (line.rfind("arg ", 0) == 0) {
        (*out)[name].args.push_back(ReadTensor(in, line));
      } else if (line.rfind("out ", 0) == 0) {
        (*out)[name].expected = ReadTensor(in, line);
      }
    }
    return out;
  }();
  *error = *failure;
  return *refs;
}

FunctionRegistry& Builtins() {
  static FunctionRegistry* registry = [] {
    auto* r = new FunctionRegistry;
    RegisterBuiltins(*r);
    return r;
  }();
  return *registry;
}

// Calls `fn` as a worker does, through the worker's own ShardExecutor
// (lookup, keyword checks and defaults, the kernel, the output count).
absl::StatusOr<std::vector<Tensor>> Call(const std::string& fn,
                                         std::vector<Tensor> args,
                                         const std::string& kwargs = "") {
  ShardCall call;
  call.function = fn;
  call.args = std::move(args);
  call.kwargs_json = kwargs;
  return ShardExecutor(&Builtins()).Run(std::move(call));
}

template <typename T>
void ExpectValuesNear(const Tensor& got, const Tensor& want, double rtol,
                      double atol) {
  for (int64_t i = 0; i < want.num_elements(); ++i) {
    const double g = got.data_as<T>()[i], w = want.data_as<T>()[i];
    if (std::isnan(w) || std::isinf(w)) {
      EXPECT_TRUE(std::isnan(w) ? std::isnan(g) : g == w)
          << "element " << i << ": got " << g << ", want " << w;
    } else {
      EXPECT_LE(std::fabs(g - w), atol + rtol * std::fabs(w))
          << "element " << i << ": got " << g << ", want " << w;
    }
  }
}

template <typename T>
void ExpectValuesEqual(const Tensor& got, const Tensor& want) {
  for (int64_t i = 0; i < want.num_elements(); ++i) {
    EXPECT_EQ(got.data_as<T>()[i], want.data_as<T>()[i]) << "element " << i;
  }
}

void ExpectTensorsMatch(const Tensor& got, const Tensor& want) {
  ASSERT_EQ(DTypeName(got.dtype()), DTypeName(want.dtype()));
  ASSERT_EQ(ShapeTuple(got.shape()), ShapeTuple(want.shape()));
  switch (want.dtype()) {
    case DType::kFloat32:
      return ExpectValuesNear<float>(got, want, 1e-5, 1e-5);
    case DType::kFloat64:
      return ExpectValuesNear<double>(got, want, 1e-12, 1e-12);
    case DType::kInt32:
      return ExpectValuesEqual<int32_t>(got, want);
    case DType::kInt64:
      return ExpectValuesEqual<int64_t>(got, want);
  }
}

class NumpyReferenceTest : public ::testing::TestWithParam<CaseSpec> {};

TEST_P(NumpyReferenceTest, MatchesNumpy) {
  const CaseSpec& c = GetParam();
  std::string error;
  const auto& refs = References(&error);
  ASSERT_EQ(error, "");
  auto it = refs.find(c.name);
  ASSERT_NE(it, refs.end()) << "no reference output for " << c.name;
  std::vector<Tensor> args;
  for (const Tensor& t : it->second.args) args.push_back(t.Clone());
  auto out = Call(c.fn, std::move(args), c.kwargs);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 1u);
  ExpectTensorsMatch((*out)[0], it->second.expected);
}

INSTANTIATE_TEST_SUITE_P(Builtins, NumpyReferenceTest,
                         ::testing::ValuesIn(AllCases()),
                         [](const ::testing::TestParamInfo<CaseSpec>& info) {
                           return info.param.name;
                         });

// --- Hand-checked values ---------------------------------------------------

template <typename T>
Tensor Make(DType dtype, Shape shape, std::vector<T> values) {
  Tensor t(dtype, std::move(shape));
  for (size_t i = 0; i < values.size(); ++i) t.data_as<T>()[i] = values[i];
  return t;
}

std::vector<Tensor> Args(Tensor a) {
  std::vector<Tensor> v;
  v.push_back(std::move(a));
  return v;
}

TEST(BuiltinsTest, RegistersAllSeven) {
  std::vector<std::string> texts;
  for (const auto& sig : Builtins().Signatures()) {
    texts.push_back(SignatureText(sig));
    EXPECT_FALSE(sig.doc().empty()) << sig.name();
    EXPECT_EQ(sig.dtypes_size(), 4) << sig.name();
  }
  EXPECT_EQ(absl::StrJoin(texts, " "),
            "add(x, y) identity(x) matmul(a, b) mul(x, y) relu(x) "
            "scale(x; alpha) sum(x; axis=null, keepdims=false)");
}

TEST(BuiltinsTest, ReluKeepsNaN) {
  const float nan = std::nanf("");
  auto out =
      Call("relu",
           Args(Make<float>(DType::kFloat32, {4}, {nan, -1.5f, 2.0f, 0.0f})));
  ASSERT_TRUE(out.ok()) << out.status();
  const float* v = (*out)[0].data_as<float>();
  EXPECT_TRUE(std::isnan(v[0]));
  EXPECT_EQ(v[1], 0.0f);
  EXPECT_EQ(v[2], 2.0f);
  EXPECT_EQ(v[3], 0.0f);
}

// relu of `x` (37 elements) against the rule spelled out element by
// element: NaN stays NaN, +-inf and every sign of zero as np.maximum(x, 0)
// gives them (-0.0 becomes +0.0).
template <typename T>
void ExpectReluOf(DType dtype, const std::vector<T>& x) {
  auto out = Call("relu", Args(Make<T>(dtype, {37}, x)));
  ASSERT_TRUE(out.ok()) << out.status();
  const T* v = (*out)[0].template data_as<T>();
  for (int i = 0; i < 37; ++i) {
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(x[i])) {
        EXPECT_TRUE(std::isnan(v[i])) << i;
        continue;
      }
      EXPECT_EQ(std::signbit(v[i]), false) << i << ": " << x[i];
    }
    EXPECT_EQ(v[i], x[i] > T(0) ? x[i] : T(0)) << i << ": " << x[i];
  }
}

// A vector long enough for SIMD packets and a scalar tail, in each dtype,
// with each special value at every position in turn.
template <typename T>
void ExpectReluOfEveryKindOfValue(DType dtype) {
  std::vector<T> base;
  for (int i = 0; i < 37; ++i) {
    base.push_back(static_cast<T>((i * 7) % 11) - static_cast<T>(5));
  }
  ExpectReluOf<T>(dtype, base);
  if constexpr (std::is_floating_point_v<T>) {
    const T specials[] = {std::numeric_limits<T>::quiet_NaN(),
                          T(-0.0),
                          -std::numeric_limits<T>::infinity(),
                          std::numeric_limits<T>::infinity(),
                          T(0.25),
                          T(-0.25)};
    for (const T special : specials) {
      for (size_t at = 0; at < base.size(); ++at) {
        std::vector<T> x = base;
        x[at] = special;
        ExpectReluOf<T>(dtype, x);
      }
    }
  }
}

TEST(BuiltinsTest, ReluOfEveryKindOfValueInEveryDType) {
  ExpectReluOfEveryKindOfValue<float>(DType::kFloat32);
  ExpectReluOfEveryKindOfValue<double>(DType::kFloat64);
  ExpectReluOfEveryKindOfValue<int32_t>(DType::kInt32);
  ExpectReluOfEveryKindOfValue<int64_t>(DType::kInt64);
}

TEST(BuiltinsTest, ScaleDTypeRules) {
  auto i32 = [] { return Make<int32_t>(DType::kInt32, {2}, {3, -4}); };
  auto out = Call("scale", Args(i32()), R"({"alpha": 2})");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].dtype(), DType::kInt32);
  EXPECT_EQ((*out)[0].data_as<int32_t>()[1], -8);

  out = Call("scale", Args(i32()), R"({"alpha": 0.5})");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].dtype(), DType::kFloat32);
  EXPECT_EQ((*out)[0].data_as<float>()[0], 1.5f);

  out = Call("scale", Args(Make<int64_t>(DType::kInt64, {1}, {3})),
             R"({"alpha": 2.0})");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].dtype(), DType::kFloat64);
  EXPECT_EQ((*out)[0].data_as<double>()[0], 6.0);

  out = Call("scale", Args(Make<float>(DType::kFloat32, {1}, {1.5f})),
             R"({"alpha": 3})");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].dtype(), DType::kFloat32);
  EXPECT_EQ((*out)[0].data_as<float>()[0], 4.5f);

  out = Call("scale", Args(i32()), R"({"alpha": 3000000000})");
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("does not fit in int32"),
            std::string::npos)
      << out.status();
}

TEST(BuiltinsTest, IdentityReturnsItsArgument) {
  auto out =
      Call("identity", Args(Make<int64_t>(DType::kInt64, {2, 1}, {7, 9})));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(ShapeTuple((*out)[0].shape()), "(2, 1)");
  EXPECT_EQ((*out)[0].data_as<int64_t>()[1], 9);
}

// --- Errors ----------------------------------------------------------------

struct ErrorCase {
  std::string fn;
  std::vector<std::pair<DType, Shape>> args;
  std::string kwargs;
  absl::StatusCode code;
  std::string message;  // a substring of the expected message
};

std::ostream& operator<<(std::ostream& os, const ErrorCase& e) {
  return os << e.fn << " " << e.kwargs << " -> " << e.message;
}

class ErrorTest : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(ErrorTest, FailsWithMessage) {
  const ErrorCase& e = GetParam();
  std::vector<Tensor> args;
  for (const auto& [dtype, shape] : e.args) args.emplace_back(dtype, shape);
  auto out = Call(e.fn, std::move(args), e.kwargs);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), e.code) << out.status();
  EXPECT_NE(out.status().message().find(e.message), std::string::npos)
      << out.status();
}

constexpr DType kF32 = DType::kFloat32;
constexpr absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;

INSTANTIATE_TEST_SUITE_P(
    Builtins, ErrorTest,
    ::testing::Values(
        ErrorCase{"add",
                  {{kF32, {2, 3}}, {kF32, {4}}},
                  "",
                  kInvalid,
                  "add: shapes (2, 3) and (4,) cannot be broadcast together "
                  "(dimension 1 of x has size 3, dimension 0 of y has size 4)"},
        ErrorCase{"mul",
                  {{kF32, {2, 1, 3}}, {kF32, {4, 2}}},
                  "",
                  kInvalid,
                  "mul: shapes (2, 1, 3) and (4, 2) cannot be broadcast"},
        ErrorCase{"matmul",
                  {{kF32, {2, 3}}, {kF32, {4, 5}}},
                  "",
                  kInvalid,
                  "matmul: contracting dimension of a (size 3) does not match "
                  "b (size 4): shapes (2, 3) and (4, 5)"},
        ErrorCase{"matmul",
                  {{kF32, {3}}, {kF32, {4}}},
                  "",
                  kInvalid,
                  "contracting dimension of a (size 3) does not match b"},
        ErrorCase{"matmul",
                  {{kF32, {}}, {kF32, {4}}},
                  "",
                  kInvalid,
                  "matmul: a has rank 0"},
        ErrorCase{"matmul",
                  {{kF32, {2, 3}}, {kF32, {1, 3, 4}}},
                  "",
                  kInvalid,
                  "matmul: b has rank 3"},
        ErrorCase{"sum",
                  {{kF32, {2, 3}}},
                  R"({"axis": 2})",
                  kInvalid,
                  "sum: axis 2 is out of bounds for an array of rank 2"},
        ErrorCase{"sum",
                  {{kF32, {2, 3}}},
                  R"({"axis": [0, -3]})",
                  kInvalid,
                  "axis -3 is out of bounds for an array of rank 2"},
        ErrorCase{"sum",
                  {{kF32, {}}},
                  R"({"axis": 0})",
                  kInvalid,
                  "axis 0 is out of bounds for an array of rank 0"},
        ErrorCase{"sum",
                  {{kF32, {2, 3}}},
                  R"({"axis": [1, -1]})",
                  kInvalid,
                  "sum: axis 1 is repeated (given as 1 and -1) for an array "
                  "of rank 2"},
        ErrorCase{"add",
                  {{kF32, {2}}},
                  "",
                  kInvalid,
                  "add(x, y) takes 2 positional arguments but 1 was given"},
        ErrorCase{"relu",
                  {{kF32, {2}}, {kF32, {2}}},
                  "",
                  kInvalid,
                  "relu(x) takes 1 positional argument but 2 were given"},
        ErrorCase{"relu",
                  {{kF32, {2}}},
                  R"({"beta": 1})",
                  kInvalid,
                  "relu got an unexpected keyword argument 'beta'"},
        ErrorCase{"scale",
                  {{kF32, {2}}},
                  "",
                  kInvalid,
                  "scale is missing the required keyword argument 'alpha'"},
        ErrorCase{"scale",
                  {{kF32, {2}}},
                  R"({"alpha": "two"})",
                  kInvalid,
                  "scale: keyword argument 'alpha' must be a JSON number"},
        ErrorCase{"sum",
                  {{kF32, {2}}},
                  R"({"axis": "x"})",
                  kInvalid,
                  "keyword argument 'axis' must be an integer, a list of"},
        ErrorCase{"sum",
                  {{kF32, {2}}},
                  R"({"keepdims": 1})",
                  kInvalid,
                  "keyword argument 'keepdims' must be a JSON boolean"},
        ErrorCase{"add",
                  {{kF32, {2}}, {DType::kInt32, {2}}},
                  "",
                  kInvalid,
                  "add needs all arguments to have one dtype, but args[0] is "
                  "float32 and args[1] is int32"},
        ErrorCase{"matmul",
                  {{DType::kFloat64, {2, 2}}, {kF32, {2, 2}}},
                  "",
                  kInvalid,
                  "matmul needs all arguments to have one dtype"},
        ErrorCase{"softmax",
                  {{kF32, {2}}},
                  "",
                  absl::StatusCode::kNotFound,
                  "unknown function 'softmax'"}));

}  // namespace
}  // namespace shardmap
