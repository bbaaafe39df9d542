// Fusion of elementwise instructions (internal to shard_program_eval).
//
// A group is a maximal tree of elementwise instructions of one shape whose
// intermediate values are used only inside the group and are not program
// outputs; its root is the one instruction whose value leaves the group.
// The group runs tile by tile (kTileElements per value, in cache) and
// writes only the root's value: no whole-array temporary per instruction.
// Operands from outside the group of the group's shape are read in place,
// one-element operands from a tile filled once, and other broadcast
// operands are gathered per tile.
//
// Not thread-safe: one evaluation's values.
#ifndef SHARDMAP_PROGRAM_EVAL_FUSION_H_
#define SHARDMAP_PROGRAM_EVAL_FUSION_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "program/eval_value.h"
#include "program/ir.h"

namespace shardmap {
namespace program {

inline constexpr int64_t kTileElements = 1024;

struct FusionPlan {
  // Per instruction: the instruction at which it runs, the root of its
  // group (itself for every instruction that is not fused into another).
  std::vector<int> runs_at;
  // Per root of an elementwise group: its members in program order, the
  // root last. Empty for other instructions.
  std::vector<std::vector<int>> members;
  // Per instruction: a 2-D transpose whose only user is a matmul, which
  // reads the transpose's operand as a transposed matrix (Eigen's GEMM
  // takes either layout): it runs at the matmul and holds no value.
  std::vector<bool> folded_transpose;
};

// With `fuse` false every elementwise instruction is a group of one and no
// transpose is folded.
FusionPlan PlanFusion(const Program& program, bool fuse);

// Runs one elementwise group. values[i] holds every instruction run so far;
// last_use[i] is the instruction at which value i is last read. The result
// may take over the buffer of an operand of the group's shape and storage
// type whose last use is this group (the buffer is not copied).
// RESOURCE_EXHAUSTED from the budget.
absl::StatusOr<Value> RunGroup(const Program& program,
                               const std::vector<int>& members,
                               const std::vector<Value>& values,
                               const std::vector<int>& last_use,
                               Budget& budget);

}  // namespace program
}  // namespace shardmap

#endif  // SHARDMAP_PROGRAM_EVAL_FUSION_H_
