// Calls while checking: which rule a function name runs, with its
// arguments bound the way Python binds them.
#include <set>

#include "absl/strings/str_cat.h"
#include "program/checker_internal.h"

namespace shardmap {
namespace program {
namespace checker_internal {
namespace {

using Keywords = std::vector<std::pair<std::string, Arg>>;

bool Among(const std::string& s, std::initializer_list<const char*> names) {
  for (const char* n : names) {
    if (s == n) return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<Value> Checker::Call(const Value& fn, SourcePos pos,
                                    const std::vector<Arg>& positional,
                                    const Keywords& keywords) {
  if (fn.kind == Value::kDTypeVal) {
    // jnp.float32(x) converts, as x.astype(jnp.float32).
    auto a = Bind(ElemTypeName(fn.elem), pos, positional, keywords, {"x"}, 1);
    if (!a.ok()) return a.status();
    return AsType(pos, (*a)[0].value, fn.elem);
  }
  if (fn.kind != Value::kFunction) {
    return Error(pos, absl::StrCat(Describe(fn), " is not callable"));
  }
  if (!fn.items.empty()) {
    // A method: self first, then `x.reshape(2, 3)` and `x.transpose(1, 0)`
    // take their ints loose as numpy does.
    std::vector<Arg> args{{fn.items[0], pos, true}};
    if ((fn.text == "reshape" || fn.text == "transpose") &&
        !positional.empty() && positional[0].value.kind == Value::kInt) {
      Arg packed{Value(), positional[0].pos, true};
      packed.value.kind = Value::kTuple;
      for (const Arg& p : positional) packed.value.items.push_back(p.value);
      args.push_back(packed);
    } else {
      args.insert(args.end(), positional.begin(), positional.end());
    }
    return CallArray(fn.text, pos, args, keywords);
  }
  return CallArray(fn.text, pos, positional, keywords);
}

absl::StatusOr<Value> Checker::CallArray(const std::string& fn, SourcePos pos,
                                         const std::vector<Arg>& positional,
                                         const Keywords& keywords) {
  auto bind = [&](const std::vector<std::string>& names, int required) {
    return Bind(fn, pos, positional, keywords, names, required);
  };
  static const std::map<std::string, std::string> kUnary = {
      {"exp", "exp"},           {"log", "log"},   {"log1p", "log1p"},
      {"sqrt", "sqrt"},         {"tanh", "tanh"}, {"sin", "sin"},
      {"cos", "cos"},           {"abs", "abs"},   {"absolute", "abs"},
      {"negative", "negative"}, {"relu", "relu"}, {"sigmoid", "sigmoid"},
      {"invert", "invert"}};
  if (auto it = kUnary.find(fn); it != kUnary.end()) {
    auto a = bind({"x"}, 1);
    if (!a.ok()) return a.status();
    return UnaryOp(it->second, (*a)[0].pos, (*a)[0].value);
  }
  static const std::map<std::string, std::string> kBinary = {
      {"add", "add"},
      {"subtract", "subtract"},
      {"multiply", "multiply"},
      {"divide", "divide"},
      {"true_divide", "divide"},
      {"floor_divide", "floor_divide"},
      {"mod", "mod"},
      {"remainder", "mod"},
      {"power", "power"},
      {"maximum", "maximum"},
      {"minimum", "minimum"},
      {"equal", "equal"},
      {"not_equal", "not_equal"},
      {"less", "less"},
      {"less_equal", "less_equal"},
      {"greater", "greater"},
      {"greater_equal", "greater_equal"},
      {"matmul", "matmul"}};
  if (auto it = kBinary.find(fn); it != kBinary.end()) {
    auto a = bind({"x1", "x2"}, 2);
    if (!a.ok()) return a.status();
    if (fn == "matmul") return MatMul(pos, (*a)[0].value, (*a)[1].value);
    return BinaryOp(it->second, pos, (*a)[0].value, (*a)[1].value);
  }
  if (fn == "where") {
    auto a = bind({"condition", "x", "y"}, 3);
    if (!a.ok()) return a.status();
    return Where(pos, (*a)[0].value, (*a)[1].value, (*a)[2].value);
  }
  if (Among(fn, {"sum", "mean", "max", "min", "amax", "amin", "argmax"})) {
    auto a = bind({"a", "axis", "keepdims"}, 1);
    if (!a.ok()) return a.status();
    bool keepdims = false;
    if ((*a)[2].given) {
      auto k = StaticBool(fn, "keepdims", (*a)[2]);
      if (!k.ok()) return k.status();
      keepdims = *k;
    }
    const std::string name = fn == "amax" ? "max" : fn == "amin" ? "min" : fn;
    return Reduce(name, pos, (*a)[0].value, (*a)[1], keepdims);
  }
  if (fn == "softmax") {
    auto a = bind({"x", "axis"}, 1);
    if (!a.ok()) return a.status();
    Arg axis = (*a)[1];
    if (!axis.given) {
      axis.value.kind = Value::kInt;
      axis.value.i = -1;
      axis.given = true;
    }
    return Softmax(pos, (*a)[0].value, axis);
  }
  if (fn == "logsumexp") {
    auto a = bind({"a", "axis", "keepdims"}, 1);
    if (!a.ok()) return a.status();
    bool keepdims = false;
    if ((*a)[2].given) {
      auto k = StaticBool(fn, "keepdims", (*a)[2]);
      if (!k.ok()) return k.status();
      keepdims = *k;
    }
    return LogSumExp(pos, (*a)[0].value, (*a)[1], keepdims);
  }
  if (fn == "transpose") {
    auto a = bind({"a", "axes"}, 1);
    if (!a.ok()) return a.status();
    return Transpose(pos, (*a)[0].value, (*a)[1]);
  }
  if (fn == "reshape") {
    // jnp.reshape(a, shape) (newshape is numpy's older name).
    std::vector<Arg> given = positional;
    Keywords kw;
    for (const auto& [k, v] : keywords) {
      kw.push_back({k == "newshape" ? "shape" : k, v});
    }
    auto a = Bind(fn, pos, given, kw, {"a", "shape"}, 2);
    if (!a.ok()) return a.status();
    return Reshape(pos, (*a)[0].value, (*a)[1]);
  }
  if (fn == "astype") {
    auto a = bind({"x", "dtype"}, 2);
    if (!a.ok()) return a.status();
    auto t = StaticDType(fn, (*a)[1]);
    if (!t.ok()) return t.status();
    return AsType(pos, (*a)[0].value, *t);
  }
  if (fn == "concatenate" || fn == "stack") {
    auto a = bind({"arrays", "axis"}, 1);
    if (!a.ok()) return a.status();
    return Concatenate(fn, pos, (*a)[0], (*a)[1]);
  }
  if (Among(fn, {"zeros", "ones", "zeros_like", "ones_like"})) {
    auto a = bind({fn.size() > 5 ? "a" : "shape", "dtype"}, 1);
    if (!a.ok()) return a.status();
    return Fill(fn, pos, *a);
  }
  if (fn == "full") {
    auto a = bind({"shape", "fill_value", "dtype"}, 2);
    if (!a.ok()) return a.status();
    return Fill(fn, pos, *a);
  }
  if (fn == "arange") {
    auto a = bind({"start", "stop", "step", "dtype"}, 1);
    if (!a.ok()) return a.status();
    return Arange(pos, *a);
  }
  return Collective(fn, pos, positional, keywords);
}

}  // namespace checker_internal
}  // namespace program
}  // namespace shardmap
