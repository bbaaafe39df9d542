// Checkpoints of every resident array: each holder writes its blocks as
// .npy files, the coordinator a manifest (dtype, shape, mesh, spec and a
// digest per block), all into a new directory that then replaces the old
// one by rename, so a crash mid-save leaves the last good checkpoint.
// Restore loads the blocks onto the live workers and republishes the
// arrays. The directory must be reachable by the coordinator and every
// worker (one host, or a shared volume).
#ifndef SHARDMAP_SERVER_CHECKPOINT_H_
#define SHARDMAP_SERVER_CHECKPOINT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/resident_index.h"
#include "server/worker_calls.h"
#include "server/worker_pool.h"

namespace shardmap {

// Errors: FAILED_PRECONDITION if an array is lost, INTERNAL/the worker's
// error if a block cannot be written, and file errors naming the path.
absl::StatusOr<std::vector<ResidentArray>> SaveCheckpoint(
    const std::string& directory, const ResidentIndex& index,
    WorkerCalls& calls);

// Errors: NOT_FOUND for a missing manifest; DATA_LOSS for a block whose
// digest does not match; FAILED_PRECONDITION if too few workers are live.
absl::StatusOr<std::vector<ResidentArray>> RestoreCheckpoint(
    const std::string& directory, ResidentIndex& index, const WorkerPool& pool,
    WorkerCalls& calls);

}  // namespace shardmap

#endif  // SHARDMAP_SERVER_CHECKPOINT_H_
