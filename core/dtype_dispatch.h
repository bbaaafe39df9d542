// Helpers the kernels share: calling a generic lambda with the C++ element
// type of a dtype, and the type integer arithmetic runs in so that
// overflow wraps around (as numpy and XLA do) instead of being undefined.
#ifndef SHARDMAP_WORKER_FUNCTIONS_DTYPE_DISPATCH_H_
#define SHARDMAP_WORKER_FUNCTIONS_DTYPE_DISPATCH_H_

#include <cstdint>
#include <type_traits>

#include "core/dtype.h"

namespace shardmap {

// Calls f(T{}) with T the C++ element type of `dtype`; returns its result.
template <typename F>
auto VisitDType(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kFloat64:
      return f(double{});
    case DType::kInt32:
      return f(int32_t{});
    case DType::kInt64:
      return f(int64_t{});
    case DType::kFloat32:
      break;
  }
  return f(float{});
}

// Integers compute as their unsigned counterparts: the same low bits as
// two's complement, with wrap-around defined. Floats compute as themselves.
template <typename T>
using Wrapping =
    typename std::conditional_t<std::is_integral_v<T>, std::make_unsigned<T>,
                                std::common_type<T>>::type;

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_FUNCTIONS_DTYPE_DISPATCH_H_
