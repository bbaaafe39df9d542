// Elementwise built-in functions over one block: identity, add, mul, scale,
// relu. Results equal jax.numpy's on the same arrays.
//
// Pure functions of their inputs: thread-safe. Functions that take a Tensor
// by value may reuse its buffer for the result.
#ifndef SHARDMAP_WORKER_FUNCTIONS_ELEMENTWISE_H_
#define SHARDMAP_WORKER_FUNCTIONS_ELEMENTWISE_H_

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/tensor.h"

namespace shardmap {

// numpy's broadcast of two shapes: align from the right; each dimension pair
// must be equal or contain a 1. `fn` prefixes the message. INVALID_ARGUMENT
// "add: shapes (2, 3) and (4,) cannot be broadcast together (dimension 1 of
// x has size 3, dimension 0 of y has size 4)".
absl::StatusOr<Shape> BroadcastShapes(absl::string_view fn, const Shape& x,
                                      const Shape& y);

// x + y and x * y with numpy broadcasting. Both must have one dtype, which
// the result keeps; integer overflow wraps around (two's complement).
// INVALID_ARGUMENT for mixed dtypes or shapes that do not broadcast;
// RESOURCE_EXHAUSTED if the broadcast result cannot be allocated.
absl::StatusOr<Tensor> Add(const Tensor& x, const Tensor& y);
absl::StatusOr<Tensor> Mul(const Tensor& x, const Tensor& y);

// x * alpha. The result dtype follows JAX's rule for a Python scalar:
//   - float32/float64 x: same dtype (alpha is rounded to it first).
//   - int32/int64 x and alpha a JSON integer (2, -3): same int dtype,
//     wrapping around on overflow. INVALID_ARGUMENT if alpha does not fit
//     in x's dtype (as JAX's OverflowError).
//   - int32 x and alpha a JSON float (2.5, and also 2.0 or 1e3, as
//     `x * 2.0` is float in JAX): float32; int64 x: float64.
// INVALID_ARGUMENT if alpha is not a JSON number.
absl::StatusOr<Tensor> Scale(Tensor x, const nlohmann::json& alpha);

// max(x, 0) elementwise, same dtype and shape; NaN stays NaN (as
// jax.nn.relu).
Tensor Relu(Tensor x);

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_FUNCTIONS_ELEMENTWISE_H_
