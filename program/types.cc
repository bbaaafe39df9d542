#include "program/types.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace shardmap {
namespace program {
namespace {

// Position in the chain bool < int* < int32 < int64 < float* < float32 <
// float64.
int Rank(DType t) {
  switch (t.elem) {
    case ElemType::kBool:
      return 0;
    case ElemType::kInt32:
      return t.weak ? 1 : 2;
    case ElemType::kInt64:
      return 3;
    case ElemType::kFloat32:
      return t.weak ? 4 : 5;
    case ElemType::kFloat64:
      return t.weak ? 4 : 6;  // weak: a weak float made float64 (Promote)
  }
  return 0;
}

}  // namespace

bool IsFloating(ElemType t) {
  return t == ElemType::kFloat32 || t == ElemType::kFloat64;
}

bool IsInteger(ElemType t) {
  return t == ElemType::kInt32 || t == ElemType::kInt64;
}

DType Promote(DType a, DType b) {
  // Of two weak floats, one made float64 by an int64 wins.
  const bool a_first = Rank(a) > Rank(b) ||
                       (Rank(a) == Rank(b) && b.elem != ElemType::kFloat64);
  DType r = a_first ? a : b;
  const DType& other = a_first ? b : a;
  // A weak float meeting an int64 array stays weak (JAX's lattice join),
  // but is made concrete as float64: the default float of the JAX that
  // has int64 (x64), as the built-ins `scale` and `pmean` do. A later
  // float32 array still wins over it, as in JAX. With every other type a
  // weak float is float32 (JAX without x64).
  if (r.weak && r.elem == ElemType::kFloat32 && !other.weak &&
      other.elem == ElemType::kInt64) {
    return {ElemType::kFloat64, true};
  }
  if (r.elem == ElemType::kBool || r.elem == ElemType::kInt64) {
    r.weak = false;
  }
  return r;
}

DType Inexact(DType t) {
  switch (t.elem) {
    case ElemType::kBool:
      return {ElemType::kFloat32, false};
    case ElemType::kInt32:
      return {ElemType::kFloat32, t.weak};
    case ElemType::kInt64:
      return {ElemType::kFloat64, false};
    default:
      return t;
  }
}

int64_t ElemBytes(ElemType t) {
  return t == ElemType::kInt64 || t == ElemType::kFloat64 ? 8 : 4;
}

std::string TypeString(ElemType elem, const std::vector<int64_t>& shape) {
  return absl::StrCat(ElemTypeName(elem), "[", absl::StrJoin(shape, ","), "]");
}

bool ParseElemType(const std::string& name, ElemType* out) {
  static const std::pair<const char*, ElemType> kNames[] = {
      {"float32", ElemType::kFloat32}, {"float64", ElemType::kFloat64},
      {"int32", ElemType::kInt32},     {"int64", ElemType::kInt64},
      {"bool", ElemType::kBool},       {"bool_", ElemType::kBool}};
  for (const auto& [n, t] : kNames) {
    if (name == n) {
      *out = t;
      return true;
    }
  }
  return false;
}

}  // namespace program
}  // namespace shardmap
