// Checkpoints of every resident array: each holder writes its blocks as
// .npy files, the coordinator a manifest (dtype, shape, mesh, spec and a
// digest per block; server/checkpoint_manifest.h), all into a new
// directory that then replaces the old one by rename, so a crash mid-save
// leaves the last good checkpoint. Every file goes through
// WriteFileAtomically. Restore checks the whole manifest, loads every block
// onto the live workers and only then republishes the arrays. Block files
// are named by the coordinator (never taken from the manifest) and workers
// read and write nothing outside the directory. The directory must be
// reachable by the coordinator and every worker (one host, or a shared
// volume).
#ifndef SHARDMAP_SERVER_CHECKPOINT_H_
#define SHARDMAP_SERVER_CHECKPOINT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/resident_index.h"
#include "server/worker_calls.h"
#include "server/worker_pool.h"

namespace shardmap {

// Errors: FAILED_PRECONDITION if an array is lost, or if `directory`
// exists and is neither an empty directory nor a checkpoint (a file, a
// symbolic link, a directory with other entries): nothing there is touched
// (that status carries kReasonCheckpointDirRefused, core/error_reason.h). The
// worker's error if a block cannot be written, and file errors
// (core/atomic_file.h) naming the path. DEADLINE_EXCEEDED if a worker's
// call is still running at `deadline` (the caller's).
absl::StatusOr<std::vector<ResidentArray>> SaveCheckpoint(
    const std::string& directory, const ResidentIndex& index,
    WorkerCalls& calls, absl::Time deadline);

// Errors: NOT_FOUND for a missing manifest; DATA_LOSS naming the file and
// field for a manifest that is malformed (ParseCheckpointManifest) and for
// a block whose digest or shape does not match; FAILED_PRECONDITION if too
// few workers are live; DEADLINE_EXCEEDED as SaveCheckpoint. A failed
// restore publishes nothing.
absl::StatusOr<std::vector<ResidentArray>> RestoreCheckpoint(
    const std::string& directory, ResidentIndex& index, const WorkerPool& pool,
    WorkerCalls& calls, absl::Time deadline);

}  // namespace shardmap

#endif  // SHARDMAP_SERVER_CHECKPOINT_H_
