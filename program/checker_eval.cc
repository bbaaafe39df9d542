// Evaluating expressions while checking: names, modules, attributes,
// operators and calls, dispatched to the rules of checker_*.cc.
#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "program/checker_internal.h"
#include "program/source_error.h"

namespace shardmap {
namespace program {
namespace checker_internal {
namespace {

const std::set<std::string>& NumpyNames() {
  static const auto* names = new std::set<std::string>{
      "where",         "maximum",      "minimum",     "abs",        "absolute",
      "exp",           "log",          "log1p",       "sqrt",       "tanh",
      "sin",           "cos",          "negative",    "sum",        "mean",
      "max",           "min",          "amax",        "amin",       "argmax",
      "transpose",     "reshape",      "concatenate", "stack",      "zeros",
      "ones",          "full",         "zeros_like",  "ones_like",  "arange",
      "matmul",        "add",          "subtract",    "multiply",   "divide",
      "true_divide",   "floor_divide", "mod",         "remainder",  "power",
      "equal",         "not_equal",    "less",        "less_equal", "greater",
      "greater_equal", "invert",       "astype"};
  return *names;
}
const std::set<std::string>& NnNames() {
  static const auto* names =
      new std::set<std::string>{"relu", "sigmoid", "softmax", "logsumexp"};
  return *names;
}
const std::set<std::string>& LaxNames() {
  static const auto* names = new std::set<std::string>{
      "psum",         "pmean",    "pmax",       "pmin",       "all_gather",
      "psum_scatter", "ppermute", "all_to_all", "axis_index", "axis_size",
      "exp",          "log",      "log1p",      "sqrt",       "tanh",
      "sin",          "cos",      "abs",        "max",        "min"};
  return *names;
}
const char* const kDTypeNames[] = {"float32", "float64", "int32",
                                   "int64",   "bool_",   "bool"};

std::string OperatorName(const std::string& op) {
  static const std::map<std::string, std::string> kOps = {
      {"+", "add"},        {"-", "subtract"},       {"*", "multiply"},
      {"/", "divide"},     {"//", "floor_divide"},  {"%", "mod"},
      {"**", "power"},     {"@", "matmul"},         {"&", "bitwise_and"},
      {"|", "bitwise_or"}, {"<", "less"},           {"<=", "less_equal"},
      {">", "greater"},    {">=", "greater_equal"}, {"==", "equal"},
      {"!=", "not_equal"}};
  auto it = kOps.find(op);
  return it == kOps.end() ? op : it->second;
}

int Distance(absl::string_view a, absl::string_view b) {
  std::vector<int> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    int diag = row[0];
    row[0] = static_cast<int>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      const int up = row[j];
      row[j] = std::min(
          {row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string CanonicalFunction(absl::string_view module,
                              absl::string_view name) {
  const std::string n(name);
  if (module == "jnp" || module == "np" || module == "jax.numpy") {
    return NumpyNames().count(n) && n != "astype" ? n : "";
  }
  if (module == "jax.nn") return NnNames().count(n) ? n : "";
  if (module == "lax" || module == "jax.lax") {
    if (!LaxNames().count(n)) return "";
    if (n == "max") return "maximum";  // lax.max is elementwise
    if (n == "min") return "minimum";
    return n;
  }
  if (module.empty()) {
    if (NumpyNames().count(n) || NnNames().count(n)) return n;
    if (LaxNames().count(n) && n != "max" && n != "min") return n;
  }
  return "";
}

std::string Nearest(absl::string_view name,
                    const std::vector<std::string>& candidates) {
  std::string best;
  int best_d = std::max<int>(2, static_cast<int>(name.size()) / 3) + 1;
  for (const std::string& c : candidates) {
    const int d = Distance(name, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  return best;
}

absl::StatusOr<Value> Checker::Lookup(const Expr& e) {
  auto it = env_.find(e.text);
  if (it != env_.end()) return it->second;
  Value v;
  if (e.text == "jnp" || e.text == "np" || e.text == "lax" || e.text == "jax") {
    v.kind = Value::kModule;
    v.text = e.text;
    return v;
  }
  ElemType t;
  // Python's own bool, int and float name dtypes too (JAX's defaults).
  if (e.text == "int" || e.text == "float") {
    v.kind = Value::kDTypeVal;
    v.elem = e.text == "int" ? ElemType::kInt32 : ElemType::kFloat32;
    return v;
  }
  if (ParseElemType(e.text, &t)) {
    v.kind = Value::kDTypeVal;
    v.elem = t;
    return v;
  }
  const std::string fn = CanonicalFunction("", e.text);
  if (!fn.empty()) {
    v.kind = Value::kFunction;
    v.text = fn;
    return v;
  }
  std::vector<std::string> candidates;
  for (const auto& [name, unused] : env_) candidates.push_back(name);
  for (const auto* set : {&NumpyNames(), &NnNames(), &LaxNames()}) {
    candidates.insert(candidates.end(), set->begin(), set->end());
  }
  std::string what = absl::StrCat("unknown name '", e.text, "'");
  if (e.text == "os" || e.text == "sys" || e.text == "open" ||
      e.text == "eval" || e.text == "exec" || e.text == "__import__") {
    absl::StrAppend(&what,
                    " (a program has no file, network or environment "
                    "access)");
    return Error(e.pos, what);
  }
  const std::string near = Nearest(e.text, candidates);
  if (!near.empty()) absl::StrAppend(&what, "; did you mean '", near, "'?");
  return Error(e.pos, what);
}

absl::StatusOr<Value> Checker::Attribute(const Expr& e) {
  auto base = Eval(*e.args[0]);
  if (!base.ok()) return base.status();
  const std::string& name = e.text;
  Value v;
  if (base->kind == Value::kModule) {
    const std::string& m = base->text;
    if (m == "jax" && (name == "numpy" || name == "lax" || name == "nn")) {
      v.kind = Value::kModule;
      v.text = absl::StrCat("jax.", name);
      return v;
    }
    if (m == "jnp" || m == "np" || m == "jax.numpy") {
      for (const char* d : kDTypeNames) {
        if (name == d) {
          v.kind = Value::kDTypeVal;
          ParseElemType(name, &v.elem);
          return v;
        }
      }
      // numpy's constants are Python floats (weakly typed).
      static const std::map<std::string, double> kConstants = {
          {"pi", M_PI}, {"e", M_E}, {"inf", HUGE_VAL}, {"nan", std::nan("")}};
      if (auto it = kConstants.find(name); it != kConstants.end()) {
        v.kind = Value::kFloat;
        v.f = it->second;
        return v;
      }
    }
    const std::string fn = CanonicalFunction(m, name);
    if (fn.empty()) {
      return Error(e.pos, absl::StrCat(m, ".", name,
                                       " is not part of the program language"));
    }
    v.kind = Value::kFunction;
    v.text = fn;
    return v;
  }
  if (base->kind == Value::kArray) {
    const ValueType& t = TypeOf(*base);
    if (name == "T") {
      Arg none;
      return Transpose(e.pos, *base, none);
    }
    if (name == "ndim") {
      v.kind = Value::kInt;
      v.i = static_cast<int64_t>(t.shape.size());
      return v;
    }
    if (name == "size") {
      auto n = Elements(e.pos, t.shape);
      if (!n.ok()) return n.status();
      v.kind = Value::kInt;
      v.i = *n;
      return v;
    }
    if (name == "shape") {
      v.kind = Value::kTuple;
      for (int64_t d : t.shape) {
        Value dim;
        dim.kind = Value::kInt;
        dim.i = d;
        v.items.push_back(dim);
      }
      return v;
    }
    if (name == "dtype") {
      v.kind = Value::kDTypeVal;
      v.elem = t.elem;
      return v;
    }
    static const std::set<std::string> kMethods = {
        "sum",    "mean",      "max",     "min",
        "argmax", "transpose", "reshape", "astype"};
    if (kMethods.count(name)) {
      v.kind = Value::kFunction;
      v.text = name;
      v.items.push_back(*base);
      return v;
    }
    return Error(
        e.pos,
        absl::StrCat("not part of the program language: attribute '", name,
                     "' of an array (arrays have .T, .shape, "
                     ".ndim, .size, .dtype, .sum, .mean, .max, .min, "
                     ".argmax, .transpose, .reshape, .astype)"));
  }
  return Error(e.pos, absl::StrCat("not part of the program language: "
                                   "attribute '",
                                   name, "' of ", Describe(*base)));
}

absl::StatusOr<Value> Checker::CallExpr(const Expr& e) {
  auto fn = Eval(*e.args[0]);
  if (!fn.ok()) return fn.status();
  std::vector<Arg> positional;
  for (size_t k = 1; k < e.args.size(); ++k) {
    auto v = Eval(*e.args[k]);
    if (!v.ok()) return v.status();
    positional.push_back({*v, e.args[k]->pos, true});
  }
  std::vector<std::pair<std::string, Arg>> keywords;
  for (const Keyword& k : e.keywords) {
    auto v = Eval(*k.value);
    if (!v.ok()) return v.status();
    keywords.push_back({k.name, {*v, k.value->pos, true}});
  }
  // Errors about the call as a whole point at the callee's name.
  SourcePos pos = e.args[0]->pos;
  return Call(*fn, pos, positional, keywords);
}

absl::StatusOr<Value> Checker::SliceTuple(SourcePos pos, const Value& t,
                                          const Value& slice) const {
  // Python's slicing of a tuple (x.shape[1:]), forward steps only.
  const int64_t n = static_cast<int64_t>(t.items.size());
  int64_t b[3] = {0, n, 1};
  for (int k = 0; k < 3; ++k) {
    const Value& part = slice.items[k];
    if (part.kind == Value::kNone) continue;
    if (part.kind != Value::kInt) {
      return Error(pos, absl::StrCat("slice bounds must be Python ints, got ",
                                     Describe(part)));
    }
    b[k] = part.i;
  }
  if (b[2] <= 0) {
    return Error(pos,
                 "not part of the program language: slice steps below "
                 "1");
  }
  for (int k = 0; k < 2; ++k) {
    if (b[k] < 0) b[k] = std::max<int64_t>(b[k] + n, 0);
    b[k] = std::min(b[k], n);
  }
  Value out;
  out.kind = Value::kTuple;
  out.is_list = t.is_list;
  for (int64_t i = b[0]; i < b[1]; i += b[2]) {
    out.items.push_back(t.items[i]);
    out.nodes += t.items[i].nodes;
  }
  return out;
}

namespace {

// A tuple whose values, through every level, outgrow kMaxTupleNodes.
absl::Status TupleTooBig(absl::string_view source, SourcePos pos) {
  return SourceError(source, pos,
                     absl::StrCat("this tuple nests more than ", kMaxTupleNodes,
                                  " values (max_tuple_nodes)"),
                     absl::StatusCode::kResourceExhausted);
}

}  // namespace

absl::StatusOr<Value> Checker::Eval(const Expr& e) {
  Value v;
  switch (e.kind) {
    case ExprKind::kInt:
      v.kind = Value::kInt;
      v.i = e.int_value;
      return v;
    case ExprKind::kFloat:
      v.kind = Value::kFloat;
      v.f = e.float_value;
      return v;
    case ExprKind::kBool:
      v.kind = Value::kBool;
      v.i = e.int_value;
      return v;
    case ExprKind::kString:
      v.kind = Value::kString;
      v.text = e.text;
      return v;
    case ExprKind::kNone:
      return v;
    case ExprKind::kEllipsis:
      v.kind = Value::kEllipsis;
      return v;
    case ExprKind::kTuple:
    case ExprKind::kList:
    case ExprKind::kSlice:
      v.kind = e.kind == ExprKind::kSlice ? Value::kSlice : Value::kTuple;
      v.is_list = e.kind == ExprKind::kList;
      for (const ExprPtr& item : e.args) {
        if (!item) {
          v.items.emplace_back();
          continue;
        }
        auto x = Eval(*item);
        if (!x.ok()) return x.status();
        v.nodes += x->nodes;
        if (v.nodes > kMaxTupleNodes) {
          return TupleTooBig(src_, e.pos);
        }
        v.items.push_back(std::move(*x));
      }
      return v;
    case ExprKind::kName:
      return Lookup(e);
    case ExprKind::kAttribute:
      return Attribute(e);
    case ExprKind::kCall:
      return CallExpr(e);
    case ExprKind::kSubscript: {
      auto base = Eval(*e.args[0]);
      if (!base.ok()) return base.status();
      auto index = Eval(*e.args[1]);
      if (!index.ok()) return index.status();
      if (base->kind == Value::kArray) return Index(e.pos, *base, *index);
      if (base->kind == Value::kTuple && index->kind == Value::kInt) {
        const int64_t n = static_cast<int64_t>(base->items.size());
        const int64_t k = index->i < 0 ? index->i + n : index->i;
        if (k < 0 || k >= n) {
          return Error(e.args[1]->pos,
                       absl::StrCat("tuple index ", index->i,
                                    " out of range for a tuple of ", n));
        }
        return base->items[k];
      }
      if (base->kind == Value::kTuple && index->kind == Value::kSlice) {
        return SliceTuple(e.pos, *base, *index);
      }
      return Error(e.pos, absl::StrCat("cannot index ", Describe(*base),
                                       " with ", Describe(*index)));
    }
    case ExprKind::kBinary:
    case ExprKind::kCompare: {
      auto a = Eval(*e.args[0]);
      if (!a.ok()) return a.status();
      auto b = Eval(*e.args[1]);
      if (!b.ok()) return b.status();
      if (e.text == "+" && a->kind == Value::kTuple &&
          b->kind == Value::kTuple) {
        if (a->items.size() + b->items.size() > kMaxTuple) {
          return Error(e.pos, absl::StrCat("tuple longer than ", kMaxTuple));
        }
        a->nodes += b->nodes - 1;
        if (a->nodes > kMaxTupleNodes) {
          return TupleTooBig(src_, e.pos);
        }
        a->items.insert(a->items.end(), b->items.begin(), b->items.end());
        return a;
      }
      if (e.text == "@") return MatMul(e.pos, *a, *b);
      return BinaryOp(OperatorName(e.text), e.pos, *a, *b);
    }
    case ExprKind::kUnary: {
      auto a = Eval(*e.args[0]);
      if (!a.ok()) return a.status();
      const std::string op = e.text == "-"   ? "negative"
                             : e.text == "~" ? "invert"
                                             : "positive";
      return UnaryOp(op, e.pos, *a);
    }
  }
  return Error(e.pos, "not part of the program language");
}

}  // namespace checker_internal
}  // namespace program
}  // namespace shardmap
