// A job's argument arrays while the client's chunks are still arriving.
// The coordinator does not wait for whole arrays before it starts the
// devices: each device call cuts its blocks out as soon as the bytes they
// need are in (cut-through), so the client-to-coordinator hop overlaps the
// coordinator-to-worker one. Chunks arrive in order (wire/chunking.h), so
// what has arrived of an argument is always a prefix of its bytes.
//
// Thread-safe: one thread receives, any number wait.
#ifndef SHARDMAP_SERVER_ARRIVING_INPUTS_H_
#define SHARDMAP_SERVER_ARRIVING_INPUTS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/tensor.h"
#include "server/job_stream.h"
#include "server/planner.h"

namespace shardmap {

class ArrivingInputs {
 public:
  // Arrays that are whole already (every byte counts as arrived).
  explicit ArrivingInputs(std::vector<Tensor> arrays);
  // Allocates one array per argument of `plan` (an empty placeholder for a
  // resident one, which the workers fetch), none of it arrived yet.
  static absl::StatusOr<std::unique_ptr<ArrivingInputs>> ForPlan(
      const JobPlan& plan);

  ArrivingInputs(const ArrivingInputs&) = delete;
  ArrivingInputs& operator=(const ArrivingInputs&) = delete;

  // The arrays, by argument. Bytes may be read only once Await said so,
  // and only before Release.
  const std::vector<Tensor>& arrays() const { return *arrays_; }
  // Keeps the arrays' bytes alive, for chunks lent from them (LentChunk):
  // they live until Release and the last owner are gone.
  std::shared_ptr<const void> owner() const { return arrays_; }

  // Reads the argument chunks that follow the JobSpec from `stream` to its
  // end, placing each and waking the waiters it satisfies; `data_hash`, if
  // not null, receives their ChunkHash. INVALID_ARGUMENT for a second
  // JobSpec or chunks that do not fit the arguments (wire/chunking.h names
  // them), CANCELLED for a client that went away before it sent them all;
  // the error also ends every wait, present and future.
  absl::Status Receive(JobStream* stream, uint64_t* data_hash);

  // Waits until bytes [0, end) of argument `arg` have arrived. Errors: the
  // receive's error, DEADLINE_EXCEEDED at `deadline` (naming the argument
  // and how much of it came).
  absl::Status Await(size_t arg, size_t end, absl::Time deadline) const;

  // Ends every wait, present and future, for bytes that have not arrived
  // with `why` (the job failed elsewhere); the first error stays.
  void Stop(absl::Status why);

  // Lets go of the arrays (after the last reader is done; lent chunks may
  // keep them a little longer).
  void Release();

 private:
  // `whole`: every byte has arrived.
  ArrivingInputs(std::vector<Tensor> arrays, bool whole);
  void Arrived(size_t arg, size_t end);

  std::shared_ptr<std::vector<Tensor>> arrays_;  // null after Release
  mutable absl::Mutex mu_;
  std::vector<size_t> arrived_ ABSL_GUARDED_BY(mu_);  // bytes, by argument
  absl::Status failed_ ABSL_GUARDED_BY(mu_);
};

}  // namespace shardmap

#endif  // SHARDMAP_SERVER_ARRIVING_INPUTS_H_
