// Elementwise built-in functions over one block, on SDK tensor views: add,
// mul, scale, relu. Results equal jax.numpy's on the same arrays.
//
// Results come from ctx.AllocateUninitialized, or are the argument view
// itself where the function says it works in place. Not thread-safe beyond
// the Context (one call, one thread).
#ifndef SHARDMAP_WORKER_FUNCTIONS_ELEMENTWISE_H_
#define SHARDMAP_WORKER_FUNCTIONS_ELEMENTWISE_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "shardmap/sdk.h"

namespace shardmap {
namespace builtin {

// numpy's broadcast of two shapes: align from the right; each dimension pair
// must be equal or contain a 1. `fn` prefixes the message. INVALID_ARGUMENT
// "add: shapes (2, 3) and (4,) cannot be broadcast together (dimension 1 of
// x has size 3, dimension 0 of y has size 4)".
absl::StatusOr<std::vector<int64_t>> BroadcastShapes(
    absl::string_view fn, const std::vector<int64_t>& x,
    const std::vector<int64_t>& y);

// x + y and x * y with numpy broadcasting. Both must have one dtype, which
// the result keeps; integer overflow wraps around (two's complement).
// INVALID_ARGUMENT for mixed dtypes or shapes that do not broadcast;
// RESOURCE_EXHAUSTED if the result cannot be allocated.
absl::StatusOr<sdk::TensorView> Add(sdk::Context& ctx, const sdk::TensorView& x,
                                    const sdk::TensorView& y);
absl::StatusOr<sdk::TensorView> Mul(sdk::Context& ctx, const sdk::TensorView& x,
                                    const sdk::TensorView& y);

// x * alpha, in place in x when the dtype stays. The result dtype follows
// JAX's rule for a Python scalar:
//   - float32/float64 x: same dtype (alpha is rounded to it first).
//   - int32/int64 x and alpha a JSON integer (2, -3): same int dtype,
//     wrapping around on overflow. INVALID_ARGUMENT if alpha does not fit
//     in x's dtype (as JAX's OverflowError).
//   - int32 x and alpha a JSON float (2.5, and also 2.0 or 1e3, as
//     `x * 2.0` is float in JAX): float32; int64 x: float64 (allocated).
// INVALID_ARGUMENT if alpha is not a JSON number.
absl::StatusOr<sdk::TensorView> Scale(sdk::Context& ctx,
                                      const sdk::TensorView& x,
                                      const nlohmann::json& alpha);

// max(x, 0) elementwise, in place in x; NaN stays NaN (as jax.nn.relu).
sdk::TensorView Relu(const sdk::TensorView& x);

}  // namespace builtin
}  // namespace shardmap

#endif  // SHARDMAP_WORKER_FUNCTIONS_ELEMENTWISE_H_
