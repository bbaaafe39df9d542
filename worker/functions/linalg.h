// Linear-algebra built-in functions over one block. Results equal
// jax.numpy's on the same arrays.
//
// On SDK tensor views; the result comes from ctx.AllocateUninitialized. Not
// thread-safe beyond the Context (one call, one thread).
#ifndef SHARDMAP_WORKER_FUNCTIONS_LINALG_H_
#define SHARDMAP_WORKER_FUNCTIONS_LINALG_H_

#include "absl/status/statusor.h"
#include "shardmap/sdk.h"

namespace shardmap {
namespace builtin {

// a @ b with numpy's rules for operands of rank 1 and 2:
//   (m, k) @ (k, n) -> (m, n)     (k,) @ (k, n) -> (n,)
//   (m, k) @ (k,)   -> (m,)       (k,) @ (k,)   -> ()
// Both must have one dtype, which the result keeps (integer overflow wraps
// around). Zero-sized dimensions are fine; k = 0 gives zeros.
// INVALID_ARGUMENT for mixed dtypes, an operand of rank 0 or above 2, or
// contracting dimensions that differ: "matmul: contracting dimension of a
// (size 3) does not match b (size 4): shapes (2, 3) and (4, 5)".
// RESOURCE_EXHAUSTED if the result cannot be allocated.
absl::StatusOr<sdk::TensorView> Matmul(sdk::Context& ctx,
                                       const sdk::TensorView& a,
                                       const sdk::TensorView& b);

}  // namespace builtin
}  // namespace shardmap

#endif  // SHARDMAP_WORKER_FUNCTIONS_LINALG_H_
