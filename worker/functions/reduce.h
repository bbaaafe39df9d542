// Reduction built-in functions over one block. Results equal jax.numpy's
// on the same arrays.
//
// On SDK tensor views; the result comes from ctx.AllocateUninitialized. Not
// thread-safe beyond the Context (one call, one thread).
#ifndef SHARDMAP_WORKER_FUNCTIONS_REDUCE_H_
#define SHARDMAP_WORKER_FUNCTIONS_REDUCE_H_

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "shardmap/sdk.h"

namespace shardmap {
namespace builtin {

// jnp.sum(x, axis, keepdims). `axis` is JSON null (every axis), an integer,
// or a list of integers; negative axes count from the end, and an empty
// list reduces nothing. The result keeps x's dtype: integers wrap around
// on overflow, floats accumulate in double and round once. A reduced
// dimension of length 0 gives 0. keepdims keeps reduced axes as size 1.
// INVALID_ARGUMENT naming the axis and the rank for an axis out of range or
// given twice, or for an `axis` of another JSON type.
absl::StatusOr<sdk::TensorView> Sum(sdk::Context& ctx, const sdk::TensorView& x,
                                    const nlohmann::json& axis, bool keepdims);

}  // namespace builtin
}  // namespace shardmap

#endif  // SHARDMAP_WORKER_FUNCTIONS_REDUCE_H_
