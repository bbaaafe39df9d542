// Helpers the kernels share: calling a generic lambda with the C++ element
// type of a dtype, and the type integer arithmetic runs in so that
// overflow wraps around (as numpy and XLA do) instead of being undefined.
#ifndef SHARDMAP_WORKER_FUNCTIONS_DTYPE_DISPATCH_H_
#define SHARDMAP_WORKER_FUNCTIONS_DTYPE_DISPATCH_H_

#include <utility>

#include "core/dtype.h"
#include "shardmap/tensor.h"

namespace shardmap {

// The SDK's, for the core's DType (whose values are the SDK's: an ABI
// promise of shardmap/tensor.h, checked in worker/functions/sdk_context.cc).
template <typename F>
auto VisitDType(DType dtype, F&& f) {
  return sdk::VisitDType(static_cast<sdk::DType>(dtype), std::forward<F>(f));
}

using sdk::Wrapping;

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_FUNCTIONS_DTYPE_DISPATCH_H_
