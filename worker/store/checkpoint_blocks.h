// The worker's side of checkpoints (SaveBlock, LoadBlock): one block of a
// resident array written to or read from a checkpoint directory.
//
// The coordinator sends the directory and a generated file name; the
// worker checks both (an absolute directory without '.' or '..'; a file
// made of name segments, see core/array_name.h) and refuses symbolic links
// under the directory, so it reads and writes nothing outside it, whatever
// a manifest says.
//
// Thread-safe (the store is).
#ifndef SHARDMAP_WORKER_CHECKPOINT_BLOCKS_H_
#define SHARDMAP_WORKER_CHECKPOINT_BLOCKS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "shardmap/v1/worker.pb.h"
#include "worker/store/resident_store.h"

namespace shardmap {

// The file `file` under `directory`. INVALID_ARGUMENT naming the field for
// a directory that is not absolute or has '.' or '..' segments, or a file
// that is not a relative path of name segments.
absl::StatusOr<std::string> CheckpointPath(const std::string& directory,
                                           const std::string& file);

// Writes the block of `request.name` version `request.version` to the
// checkpoint (atomically) and returns its digest. Errors: INVALID_ARGUMENT
// as CheckpointPath, or for a request that still sets `path`; NOT_FOUND if
// the block is not held here; file errors naming the path.
absl::StatusOr<uint64_t> SaveCheckpointBlock(const ResidentStore& store,
                                             const v1::SaveBlockRequest& r);

// Reads the block, checks it and stores it as `request.version`.
// Errors: INVALID_ARGUMENT as above or for a bad name, mesh, spec or
// header; NOT_FOUND for a missing file; DATA_LOSS naming the file for a
// symbolic link, a digest or a shape that does not match; the store's
// errors.
absl::Status LoadCheckpointBlock(ResidentStore& store,
                                 const v1::LoadBlockRequest& r);

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_CHECKPOINT_BLOCKS_H_
