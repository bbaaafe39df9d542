#include "core/dtype.h"

#include "absl/strings/str_cat.h"

namespace shardmap {

size_t ItemSize(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
    case DType::kInt32:
      return 4;
    case DType::kFloat64:
    case DType::kInt64:
      return 8;
  }
  return 0;
}

std::string DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return "float32";
    case DType::kFloat64:
      return "float64";
    case DType::kInt32:
      return "int32";
    case DType::kInt64:
      return "int64";
  }
  return "unknown";
}

absl::StatusOr<DType> ParseDType(absl::string_view name) {
  for (DType d : kAllDTypes) {
    if (DTypeName(d) == name) return d;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unsupported dtype '", name,
                   "'; supported: float32, float64, int32, int64"));
}

bool IsFloating(DType dtype) {
  return dtype == DType::kFloat32 || dtype == DType::kFloat64;
}

}  // namespace shardmap
