// Runs a checked program (program/ir.h) on one device's blocks.
//
// Chains of elementwise instructions are fused: they are evaluated tile by
// tile (a few KiB per value, kept in cache) into the chain's one result,
// without a whole-array temporary per instruction. Matmuls use Eigen's
// blocked kernels; a 2-D transpose whose only user is a matmul is read in
// place as a transposed matrix, never copied. Values are freed after their
// last use.
//
// Not thread-safe per call; independent calls may run concurrently.
#ifndef SHARDMAP_PROGRAM_EVALUATOR_H_
#define SHARDMAP_PROGRAM_EVALUATOR_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "core/tensor.h"
#include "program/collectives.h"
#include "program/ir.h"

namespace shardmap {
namespace program {

struct EvalOptions {
  // Polled between instructions; true stops the run with CANCELLED.
  std::function<bool()> cancelled = [] { return false; };
  // Bytes the run may hold at once beyond its arguments
  // (RESOURCE_EXHAUSTED naming the instruction when exceeded).
  uint64_t max_bytes = UINT64_MAX;
  // Fuse chains of elementwise instructions (the default); false runs each
  // one on its own (tests compare the two).
  bool fuse = true;
};

// `args` match program.params in count, dtype and shape (INVALID_ARGUMENT
// naming the argument otherwise); they may be consumed. A malformed program
// (one the checker would not produce) is INVALID_ARGUMENT "malformed
// program: ..." before anything runs. Element semantics where numpy warns
// or leaves a result undefined (integer division by zero, NaN to integer,
// negative integer powers...) are listed in program/eval_scalar.h. A bool
// output is returned as int32 0/1. `collectives` may
// be null for a program without collectives (FAILED_PRECONDITION
// otherwise). Outputs are float32, float64, int32 or int64 tensors.
absl::StatusOr<std::vector<Tensor>> Evaluate(const Program& program,
                                             std::vector<Tensor> args,
                                             Collectives* collectives,
                                             const EvalOptions& options = {});

}  // namespace program
}  // namespace shardmap

#endif  // SHARDMAP_PROGRAM_EVALUATOR_H_
