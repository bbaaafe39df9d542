// What the evaluator checks of a program before running it (internal to
// shard_program_eval): every invariant its kernels rely on, so that no IR,
// however it was made, can make them read or write out of bounds.
//
// Thread-safe: a pure function of its input.
#ifndef SHARDMAP_PROGRAM_EVAL_VALIDATE_H_
#define SHARDMAP_PROGRAM_EVAL_VALIDATE_H_

#include "absl/status/status.h"
#include "program/ir.h"

namespace shardmap {
namespace program {

// INVALID_ARGUMENT "malformed program: instruction 3 (add at line 1,
// column 5): ..." naming the first broken invariant: operands that are not
// earlier instructions, a wrong number of operands, shapes or elems that
// do not agree with the op (numpy's broadcasting and matmul rules, the
// reduced shape, the permuted or sliced shape, ...), attributes out of
// range, a max, min or argmax over an empty axis, or arrays too large to
// address. Collective results are checked when they arrive.
absl::Status ValidateProgram(const Program& program);

}  // namespace program
}  // namespace shardmap

#endif  // SHARDMAP_PROGRAM_EVAL_VALIDATE_H_
