// The coordinator's calls on whole resident arrays, without gRPC: list,
// delete (once per call_id), save to and restore from a checkpoint. Each
// takes the locks of the arrays it uses (NameLocks), so it never sees a
// job half-way through writing them.
//
// Thread-safe.
#ifndef SHARDMAP_SERVER_ARRAY_SERVICE_H_
#define SHARDMAP_SERVER_ARRAY_SERVICE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/call_registry.h"
#include "server/name_locks.h"
#include "server/resident_index.h"
#include "server/worker_pool.h"

namespace shardmap {

class WorkerCalls;  // server/worker_calls.h (gRPC stubs)

class ArrayService {
 public:
  // `call_registry` (idempotency keys) may be null: call_ids are then
  // ignored. None is owned.
  ArrayService(ResidentIndex* index, NameLocks* locks, WorkerPool* pool,
               WorkerCalls* calls, CallRegistry* call_registry)
      : index_(index),
        locks_(locks),
        pool_(pool),
        calls_(calls),
        call_registry_(call_registry) {}
  ArrayService(const ArrayService&) = delete;
  ArrayService& operator=(const ArrayService&) = delete;

  // The arrays whose names start with `prefix`.
  std::vector<v1::ResidentInfo> List(const std::string& prefix) const;
  // Removes `name` from the index, then frees its blocks on the workers
  // (best effort: a worker that is gone freed them already). A repeat of
  // a finished `call_id` is OK without deleting again. Errors:
  // CallRegistry::Begin's; DEADLINE_EXCEEDED naming the array while a job
  // still uses it at `deadline`; NOT_FOUND for an unknown name.
  absl::Status Delete(const std::string& name, const std::string& call_id,
                      absl::Time deadline);
  // Writes every resident array to `directory`, holding them still (read
  // locks) meanwhile. Errors: DEADLINE_EXCEEDED as Delete; SaveCheckpoint's
  // (server/checkpoint.h), with their ReasonOf.
  absl::StatusOr<std::vector<ResidentArray>> Save(const std::string& directory,
                                                  absl::Time deadline);
  // Loads `directory` onto the workers; every call to a worker ends by
  // `deadline`. Errors: RestoreCheckpoint's (server/checkpoint.h).
  absl::StatusOr<std::vector<ResidentArray>> Restore(
      const std::string& directory, absl::Time deadline);

 private:
  ResidentIndex* const index_;         // Not owned.
  NameLocks* const locks_;             // Not owned.
  WorkerPool* const pool_;             // Not owned.
  WorkerCalls* const calls_;           // Not owned.
  CallRegistry* const call_registry_;  // Not owned; may be null.
};

}  // namespace shardmap

#endif  // SHARDMAP_SERVER_ARRAY_SERVICE_H_
