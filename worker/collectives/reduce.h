// The elementwise reduction the collectives combine arrays with.
#ifndef SHARDMAP_WORKER_COLLECTIVES_REDUCE_H_
#define SHARDMAP_WORKER_COLLECTIVES_REDUCE_H_

#include <cstdint>

#include "absl/types/span.h"
#include "core/dtype.h"
#include "worker/collectives/collective_types.h"

namespace shardmap {

// acc[i] = op(acc[i], in[i]) for every element of `dtype`, as
// jnp.add / jnp.maximum / jnp.minimum compute it:
// - integer sums wrap around (two's complement), never undefined;
// - max and min propagate NaN: if either operand is NaN the result is NaN
//   (acc's NaN when both are).
// The result depends only on the two operands and their order, so every
// device combining the same bytes in the same order gets the same bytes.
//
// Requires acc.size() == in.size(), a whole number of elements, and spans
// that do not overlap. They need no alignment. Thread-compatible: no state.
void ReduceInto(DType dtype, ReduceOp op, absl::Span<uint8_t> acc,
                absl::Span<const uint8_t> in);

// "sum", "max", "min".
const char* ReduceOpName(ReduceOp op);

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_COLLECTIVES_REDUCE_H_
