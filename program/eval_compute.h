// Reductions, matmul and collectives of the evaluator (internal to
// shard_program_eval). Instructions are validated (program/eval_validate.h);
// results are allocated through the budget (RESOURCE_EXHAUSTED naming the
// instruction).
//
// Reduce and MatMul are pure functions of their inputs; RunCollective is as
// thread-safe as the Collectives it calls.
#ifndef SHARDMAP_PROGRAM_EVAL_COMPUTE_H_
#define SHARDMAP_PROGRAM_EVAL_COMPUTE_H_

#include "absl/status/statusor.h"
#include "program/collectives.h"
#include "program/eval_value.h"

namespace shardmap {
namespace program {

// kReduceSum, kReduceMax, kReduceMin, kMean, kArgMax. Float sums and means
// accumulate in float64 and round once; integer sums wrap; max and min
// propagate NaN; argmax gives the first maximum (the first NaN if any).
absl::StatusOr<Value> Reduce(Budget& budget, const Instr& in, const Value& x);

// numpy matmul: 1-D operands, batch dimensions broadcast; Eigen's blocked
// GEMM per matrix over the buffers in place. Integers wrap; bool is
// "any (a and b)". A transposed operand (2-D only) holds the transpose of
// the matrix the product takes (a folded transpose, eval_fusion.h).
absl::StatusOr<Value> MatMul(Budget& budget, const Instr& in, const Value& a,
                             const Value& b, bool a_transposed = false,
                             bool b_transposed = false);

// A collective through `collectives` (FAILED_PRECONDITION when null).
// INTERNAL naming the instruction if the result's dtype or shape is not
// the instruction's. `x` is null for kAxisIndex.
absl::StatusOr<Value> RunCollective(Budget& budget, const Instr& in,
                                    const Value* x, Collectives* collectives);

}  // namespace program
}  // namespace shardmap

#endif  // SHARDMAP_PROGRAM_EVAL_COMPUTE_H_
