// Element types of arrays and their names in numpy and in the proto.
#ifndef SHARDMAP_CORE_DTYPE_H_
#define SHARDMAP_CORE_DTYPE_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace shardmap {

enum class DType { kFloat32, kFloat64, kInt32, kInt64 };

inline constexpr DType kAllDTypes[] = {DType::kFloat32, DType::kFloat64,
                                       DType::kInt32, DType::kInt64};

size_t ItemSize(DType dtype);
// "float32", "float64", "int32", "int64" (numpy's names).
std::string DTypeName(DType dtype);
// Accepts the names above. INVALID_ARGUMENT for anything else.
absl::StatusOr<DType> ParseDType(absl::string_view name);
bool IsFloating(DType dtype);

}  // namespace shardmap

#endif  // SHARDMAP_CORE_DTYPE_H_
