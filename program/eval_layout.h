// Layout kernels of the evaluator (internal to shard_program_eval): the
// strided walk they share with the fused elementwise path, and transpose,
// reshape, slice, concatenate, broadcast, constant and arange.
//
// Operands are already validated (program/eval_validate.h): shapes,
// perms and bounds agree with the instruction. Results are allocated
// through the budget (RESOURCE_EXHAUSTED naming the instruction).
#ifndef SHARDMAP_PROGRAM_EVAL_LAYOUT_H_
#define SHARDMAP_PROGRAM_EVAL_LAYOUT_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "program/eval_value.h"

namespace shardmap {
namespace program {

// C-order element strides of `shape`.
std::vector<int64_t> RowMajorStrides(const Shape& shape);
// Element strides of an array of shape `from` read as the numpy broadcast
// of it to `to`: 0 along dimensions it is broadcast over.
std::vector<int64_t> BroadcastStrides(const Shape& from, const Shape& to);

// A view of a source buffer: element i of `shape` (C order, multi-index
// idx) is src[base + sum_d idx[d] * strides[d]].
struct StridedView {
  const uint8_t* src = nullptr;
  size_t elem_bytes = 4;  // 4 or 8
  int64_t base = 0;
  Shape shape;
  std::vector<int64_t> strides;
};

// Copies elements [first, first + count) of the view, in C order, to dst.
void Gather(const StridedView& view, int64_t first, int64_t count,
            uint8_t* dst);

absl::StatusOr<Value> Transpose(Budget& budget, const Instr& in,
                                const Value& x);
// Shares x's storage (no copy).
Value Reshape(const Instr& in, const Value& x);
absl::StatusOr<Value> Slice(Budget& budget, const Instr& in, const Value& x);
absl::StatusOr<Value> Concatenate(Budget& budget, const Instr& in,
                                  const std::vector<const Value*>& xs);
absl::StatusOr<Value> BroadcastTo(Budget& budget, const Instr& in,
                                  const Value& x);
absl::StatusOr<Value> Constant(Budget& budget, const Instr& in);
absl::StatusOr<Value> Iota(Budget& budget, const Instr& in);

// A copy of `v` as a tensor of its own shape (moves the storage out when
// `v` is its only holder and the shapes agree).
absl::StatusOr<Tensor> ToTensor(Value v);

}  // namespace program
}  // namespace shardmap

#endif  // SHARDMAP_PROGRAM_EVAL_LAYOUT_H_
