// Array constructors: zeros, ones, full, zeros_like, ones_like, arange.
// Their values are constants: invariant over every mesh axis, except the
// *_like ones, which vary as their argument does (as lax.full_like).
#include <cmath>

#include "absl/strings/str_cat.h"
#include "program/checker_internal.h"

namespace shardmap {
namespace program {
namespace checker_internal {

absl::StatusOr<Value> Checker::Fill(const std::string& fn, SourcePos pos,
                                    const std::vector<Arg>& a) {
  const bool like = fn == "zeros_like" || fn == "ones_like";
  const Arg& dtype_arg = fn == "full" ? a[2] : a[1];
  std::vector<int64_t> shape;
  std::set<std::string> vma;
  DType t{ElemType::kFloat32, false};  // jnp's default dtype
  double value = fn == "ones" || fn == "ones_like" ? 1 : 0;
  if (like) {
    auto d = DTypeOf(a[0].pos, a[0].value);
    if (!d.ok()) return d.status();
    t = *d;
    if (a[0].value.kind == Value::kArray) {
      shape = TypeOf(a[0].value).shape;
      vma = TypeOf(a[0].value).vma;
    }
  } else {
    auto s = StaticInts(fn, "shape", a[0]);
    if (!s.ok()) return s.status();
    shape = *s;
    if (shape.size() > kMaxRank) {
      return Error(a[0].pos,
                   absl::StrCat(fn, ": more than ", kMaxRank, " dimensions"));
    }
  }
  if (fn == "full") {
    const Value& f = a[1].value;
    if (f.kind != Value::kInt && f.kind != Value::kFloat &&
        f.kind != Value::kBool) {
      return Error(a[1].pos, absl::StrCat("full: fill_value must be a Python "
                                          "number known before the program "
                                          "runs, got ",
                                          Describe(f)));
    }
    auto d = DTypeOf(a[1].pos, f);
    if (!d.ok()) return d.status();
    t = *d;
    value = f.kind == Value::kFloat ? f.f : static_cast<double>(f.i);
  }
  if (dtype_arg.given && dtype_arg.value.kind != Value::kNone) {
    auto e = StaticDType(fn, dtype_arg);
    if (!e.ok()) return e.status();
    t = {*e, false};
  }
  if (auto n = Elements(pos, shape); !n.ok()) return n.status();
  if (!IsFloating(t.elem) && value != std::floor(value)) {
    value = std::trunc(value);
  }
  if (!IsFloating(t.elem) && !(std::fabs(value) < 9.2e18)) {
    return Error(a[1].pos, absl::StrCat(fn, ": cannot convert ", value, " to ",
                                        ElemTypeName(t.elem)));
  }
  auto c =
      Constant(pos, t, value,
               IsFloating(t.elem) ? 0 : static_cast<int64_t>(value), shape);
  if (!c.ok()) return c;
  if (options().check_vma) prog_.instrs[c->instr].type.vma = vma;
  return c;
}

absl::StatusOr<Value> Checker::Arange(SourcePos pos,
                                      const std::vector<Arg>& a) {
  double v[3] = {0, 0, 1};
  bool any_float = false;
  std::vector<const Arg*> given;
  for (int k = 0; k < 3; ++k) {
    if (!a[k].given || a[k].value.kind == Value::kNone) continue;
    const Value& x = a[k].value;
    if (x.kind != Value::kInt && x.kind != Value::kFloat) {
      return Error(a[k].pos, absl::StrCat("arange: bounds must be Python "
                                          "numbers known before the program "
                                          "runs, got ",
                                          Describe(x)));
    }
    any_float = any_float || x.kind == Value::kFloat;
    v[k] = x.kind == Value::kFloat ? x.f : static_cast<double>(x.i);
  }
  double start = v[0], stop = v[1];
  if (!a[1].given || a[1].value.kind == Value::kNone) {
    start = 0;
    stop = v[0];
  }
  const double step = v[2];
  if (step == 0) return Error(pos, "arange: step must not be zero");
  const double len = std::ceil((stop - start) / step);
  if (!(len < 1e15)) {
    return Error(pos, absl::StrCat("arange: ", len, " elements is too many"));
  }
  DType t{any_float ? ElemType::kFloat32 : ElemType::kInt32, false};
  if (a[3].given && a[3].value.kind != Value::kNone) {
    auto e = StaticDType("arange", a[3]);
    if (!e.ok()) return e.status();
    t = {*e, false};
  }
  if (t.elem == ElemType::kBool) {
    return Error(a[3].pos, "arange: dtype bool is not supported");
  }
  Instr in;
  in.op = OpCode::kIota;
  in.attrs.value = start;
  const double bound = t.elem == ElemType::kInt64 ? 9e15 : 2.1e9;
  if (!IsFloating(t.elem) &&
      !(std::fabs(start) < bound && std::fabs(start + step * len) < bound)) {
    return Error(pos, absl::StrCat("arange: the values do not fit in ",
                                   ElemTypeName(t.elem)));
  }
  in.attrs.int_value = IsFloating(t.elem) ? 0 : static_cast<int64_t>(start);
  in.attrs.step = step;
  in.type.elem = t.elem;
  in.type.shape = {len > 0 ? static_cast<int64_t>(len) : 0};
  in.pos = pos;
  in.flops = in.type.shape[0];
  auto i = Emit(in);
  if (!i.ok()) return i.status();
  return ArrayValue(*i, false);
}

}  // namespace checker_internal
}  // namespace program
}  // namespace shardmap
