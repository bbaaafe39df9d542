// The elementwise kernels of the evaluator (internal to
// shard_program_eval): one instruction over a run of elements, with the
// scalar semantics of program/eval_scalar.h. The fused path calls it tile
// by tile; an unfused instruction is a fused group of one.
//
// Thread-safe: pure functions of their inputs.
#ifndef SHARDMAP_PROGRAM_EVAL_ELEMENTWISE_H_
#define SHARDMAP_PROGRAM_EVAL_ELEMENTWISE_H_

#include <cstdint>

#include "program/ir.h"

namespace shardmap {
namespace program {

// Computes `n` elements of the elementwise instruction `in`: ins[k] holds
// n elements of operand k, whose elem is operand_elems[k]; `out` receives
// n elements of in.type.elem and may be the same buffer as an input. The
// instruction is validated (program/eval_validate.h): op, arity and elems
// agree.
void ApplyElementwise(const Instr& in, const ElemType* operand_elems, int64_t n,
                      const void* const* ins, void* out);

}  // namespace program
}  // namespace shardmap

#endif  // SHARDMAP_PROGRAM_EVAL_ELEMENTWISE_H_
