// Binding call arguments and reading static (check-time) values.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "program/checker_internal.h"
#include "program/source_error.h"

namespace shardmap {
namespace program {
namespace checker_internal {

absl::Status Checker::Error(SourcePos p, absl::string_view what) const {
  return SourceError(src_, p, what);
}

absl::StatusOr<int> Checker::Emit(Instr instr) {
  if (static_cast<int64_t>(prog_.instrs.size()) >=
      options_.limits.max_instructions) {
    return SourceError(
        src_, instr.pos,
        absl::StrCat("the program needs more than ",
                     options_.limits.max_instructions,
                     " instructions, the limit (max_instructions)"),
        absl::StatusCode::kResourceExhausted);
  }
  // No single value may outgrow the peak limit: refused here, before
  // any later rule multiplies its dimensions.
  int64_t bytes = ElemBytes(instr.type.elem);
  for (int64_t d : instr.type.shape) {
    bytes = d != 0 && bytes > INT64_MAX / d ? INT64_MAX : bytes * d;
  }
  if (bytes > options_.limits.max_peak_bytes) {
    return SourceError(
        src_, instr.pos,
        absl::StrCat("this value, ",
                     TypeString(instr.type.elem, instr.type.shape), ", needs ",
                     bytes, " bytes per device, over the limit of ",
                     options_.limits.max_peak_bytes, " bytes (max_peak_bytes)"),
        absl::StatusCode::kResourceExhausted);
  }
  if (!options_.check_vma) instr.type.vma.clear();
  prog_.instrs.push_back(std::move(instr));
  return static_cast<int>(prog_.instrs.size()) - 1;
}

Value Checker::ArrayValue(int instr, bool weak) const {
  Value v;
  v.kind = Value::kArray;
  v.instr = instr;
  v.weak = weak;
  return v;
}

std::string Checker::Describe(const Value& v) const {
  switch (v.kind) {
    case Value::kArray:
      return absl::StrCat("an array ",
                          TypeString(TypeOf(v).elem, TypeOf(v).shape));
    case Value::kInt:
      return absl::StrCat("the int ", v.i);
    case Value::kFloat:
      return absl::StrCat("the float ", v.f);
    case Value::kBool:
      return v.i ? "True" : "False";
    case Value::kString:
      return absl::StrCat("the string '", v.text, "'");
    case Value::kTuple:
      return v.is_list ? "a list" : "a tuple";
    case Value::kNone:
      return "None";
    case Value::kEllipsis:
      return "...";
    case Value::kSlice:
      return "a slice";
    case Value::kDTypeVal:
      return absl::StrCat("the dtype ", ElemTypeName(v.elem));
    case Value::kModule:
      return absl::StrCat("the module ", v.text);
    case Value::kFunction:
      return absl::StrCat("the function ", v.text);
  }
  return "a value";
}

absl::StatusOr<std::vector<Arg>> Checker::Bind(
    absl::string_view fn, SourcePos pos, const std::vector<Arg>& positional,
    const std::vector<std::pair<std::string, Arg>>& keywords,
    const std::vector<std::string>& names, int required) const {
  std::vector<Arg> out(names.size());
  if (positional.size() > names.size()) {
    return Error(
        positional[names.size()].pos,
        absl::StrCat(fn, " takes at most ", names.size(),
                     " positional arguments (", absl::StrJoin(names, ", "),
                     "), ", positional.size(), " given"));
  }
  for (size_t k = 0; k < positional.size(); ++k) out[k] = positional[k];
  for (const auto& [name, arg] : keywords) {
    size_t k = 0;
    while (k < names.size() && names[k] != name) ++k;
    if (k == names.size()) {
      return Error(arg.pos,
                   absl::StrCat(fn, " has no argument '", name, "'; it takes ",
                                absl::StrJoin(names, ", ")));
    }
    if (out[k].given) {
      return Error(arg.pos,
                   absl::StrCat(fn, " got two values for '", name, "'"));
    }
    out[k] = arg;
  }
  for (int k = 0; k < required; ++k) {
    if (!out[k].given) {
      return Error(
          pos, absl::StrCat(fn, " is missing its argument '", names[k], "'"));
    }
  }
  return out;
}

absl::StatusOr<int64_t> Checker::StaticInt(absl::string_view fn,
                                           absl::string_view what,
                                           const Arg& a) const {
  if (a.value.kind == Value::kInt) return a.value.i;
  return Error(a.pos, absl::StrCat(fn, ": ", what,
                                   " must be a Python int known before the "
                                   "program runs, got ",
                                   Describe(a.value)));
}

absl::StatusOr<bool> Checker::StaticBool(absl::string_view fn,
                                         absl::string_view what,
                                         const Arg& a) const {
  if (a.value.kind == Value::kBool || a.value.kind == Value::kInt) {
    return a.value.i != 0;
  }
  return Error(a.pos, absl::StrCat(fn, ": ", what,
                                   " must be True or False, "
                                   "got ",
                                   Describe(a.value)));
}

absl::StatusOr<std::vector<int64_t>> Checker::StaticInts(absl::string_view fn,
                                                         absl::string_view what,
                                                         const Arg& a) const {
  if (a.value.kind == Value::kInt) return std::vector<int64_t>{a.value.i};
  std::vector<int64_t> out;
  if (a.value.kind == Value::kTuple) {
    for (const Value& v : a.value.items) {
      if (v.kind != Value::kInt) break;
      out.push_back(v.i);
    }
    if (out.size() == a.value.items.size()) return out;
  }
  return Error(a.pos, absl::StrCat(fn, ": ", what,
                                   " must be an int or a "
                                   "tuple of ints, got ",
                                   Describe(a.value)));
}

absl::StatusOr<ElemType> Checker::StaticDType(absl::string_view fn,
                                              const Arg& a) const {
  ElemType t;
  if (a.value.kind == Value::kDTypeVal) return a.value.elem;
  if (a.value.kind == Value::kString && ParseElemType(a.value.text, &t)) {
    return t;
  }
  return Error(a.pos, absl::StrCat(fn,
                                   ": dtype must be one of float32, "
                                   "float64, int32, int64, bool (jnp.float32 "
                                   "or 'float32'), got ",
                                   Describe(a.value)));
}

absl::StatusOr<int64_t> Checker::NormalizeAxis(absl::string_view fn,
                                               SourcePos pos, int64_t axis,
                                               int64_t rank) const {
  if (axis < -rank || axis >= rank) {
    return Error(pos,
                 absl::StrCat(fn, ": axis ", axis,
                              " is out of bounds for an array of rank ", rank));
  }
  return axis < 0 ? axis + rank : axis;
}

absl::StatusOr<int64_t> Checker::Elements(
    SourcePos pos, const std::vector<int64_t>& shape) const {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return Error(pos, "negative dimensions are not allowed");
    if (d != 0 && n > INT64_MAX / 8 / d) {
      return SourceError(
          src_, pos,
          absl::StrCat("an array of shape (", absl::StrJoin(shape, ", "),
                       ") is too large to hold"),
          absl::StatusCode::kResourceExhausted);
    }
    n *= d;
  }
  return n;
}

}  // namespace checker_internal
}  // namespace program
}  // namespace shardmap
