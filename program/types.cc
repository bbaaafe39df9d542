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
      return 6;
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
  DType r = Rank(a) >= Rank(b) ? a : b;
  if (r.elem == ElemType::kBool || r.elem == ElemType::kInt64 ||
      r.elem == ElemType::kFloat64) {
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
