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

// out[i] = op(a[i], b[i]): ReduceInto with the first operand read from
// `a` instead of `out`. `out` is either `a` itself or overlaps neither.
// Sizes as ReduceInto.
void ReduceFrom(DType dtype, ReduceOp op, absl::Span<uint8_t> out,
                absl::Span<const uint8_t> a, absl::Span<const uint8_t> b);

// ReduceInto for an operand that arrives in chunks of any size, in order
// (PeerTransport::RecvChunks): each chunk is combined into the next bytes
// of `acc`, an element split between two chunks once both halves are in.
// After chunks of acc.size() bytes in all, acc holds what
// ReduceInto(dtype, op, acc, whole operand) would; with `first`, what
// ReduceFrom(dtype, op, acc, first, whole operand) would. Thread-compatible.
class ChunkedReduce {
 public:
  // `acc` (and `first`, of acc's size if not empty) must outlive the object.
  ChunkedReduce(DType dtype, ReduceOp op, absl::Span<uint8_t> acc,
                absl::Span<const uint8_t> first = {});
  // Requires the bytes so far plus chunk.size() <= acc.size().
  void Add(absl::Span<const uint8_t> chunk);
  // Bytes combined so far (whole elements; a split one counts once done).
  size_t done() const { return done_; }

 private:
  const DType dtype_;
  const ReduceOp op_;
  const size_t item_;
  const absl::Span<uint8_t> acc_;
  const absl::Span<const uint8_t> first_;  // acc_ when combining in place
  size_t done_ = 0;
  // The first bytes of an element split between chunks.
  uint8_t partial_[16] = {};
  size_t partial_size_ = 0;
};

// "sum", "max", "min".
const char* ReduceOpName(ReduceOp op);

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_COLLECTIVES_REDUCE_H_
