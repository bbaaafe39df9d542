// One device's part of one job, from its RunShard stream to its end:
//
//   Receive  the header and argument chunks (worker/shard_call_receiver.h);
//   wait     for the job's turn among this worker's jobs (JobSequencer);
//   execute  with the resident blocks it reads and a communicator over its
//            peers, then hand the turn on;
//   send     the output headers and digests, and the chunks asked for;
//   decide   (a two-phase job) keep the staged resident writes only if the
//            coordinator commits; anything else (an abort, the stream
//            ending, a cancel) drops them.
//
// Free of gRPC: the call is a ShardStream, the other workers are JobPeers.
// The Worker service adapts its gRPC call to it (worker/worker_service.h).
//
// One ShardJob per call, used from the call's thread; the services it is
// given are shared with other jobs (and thread-safe).
#ifndef SHARDMAP_WORKER_SHARD_JOB_H_
#define SHARDMAP_WORKER_SHARD_JOB_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/mesh.h"
#include "worker/job_peers.h"
#include "worker/job_sequencer.h"
#include "worker/memory_budget.h"
#include "worker/shard_call_receiver.h"
#include "worker/shard_executor.h"
#include "worker/shard_stream.h"
#include "worker/state_out_reshard.h"
#include "worker/store/resident_store.h"

namespace shardmap {

class Communicator;  // worker/collectives/communicator.h

class ShardJob {
 public:
  struct Options {
    // Largest total of argument bytes one job may bring to this worker.
    uint64_t max_job_bytes = uint64_t{16} << 30;
    // Longest wait for one peer message when the job does not say.
    absl::Duration collective_timeout = absl::Seconds(30);
  };
  // What the job runs on. Not owned; each outlives the job.
  struct Services {
    const ShardExecutor* executor = nullptr;
    JobPeers* peers = nullptr;
    ResidentStore* store = nullptr;
    JobSequencer* sequencer = nullptr;  // null: jobs run as they arrive
    MemoryBudget* budget = nullptr;     // null: no memory budget
  };

  // `stream` must outlive the job; `deadline` is the call's.
  ShardJob(const Options& options, const Services& services,
           ShardStream* stream, absl::Time deadline);

  // Reads the job from the stream. Errors as ReceiveCall; a job that will
  // not run gives its ticket up, so the jobs after it need not wait.
  absl::Status Receive();
  // The job's id, once received.
  const std::string& job_id() const { return received_.header.job_id(); }

  // Runs the received job to its end; the status the call ends with.
  // Errors: ABORTED (a job planned for an earlier process at this address,
  // or a ticket given up), DEADLINE_EXCEEDED / CANCELLED (while waiting its
  // turn, or cancelled before its outputs went out: "job cancelled"), the
  // errors of fetching resident blocks, of the function, of the memory
  // budget and of staging its writes; CANCELLED "coordinator went away" if
  // the stream breaks while sending; a commit's error, annotated with the
  // device ("device N cannot keep the job's writes: ..."). No resident
  // write is stored unless the job commits (a one-phase job stores none).
  absl::Status Run();

 private:
  // ABORTED if the job names another process of this worker's address.
  absl::Status CheckIncarnation() const;
  // Waits for the turn and runs the function with its resident blocks and
  // collectives; the turn ends when this returns. The digests of what the
  // device read go to `described`; the states it keeps, to `states`.
  // Written states with an out spec are left in it
  // (worker/state_out_reshard.h), the memory that takes in `reshard_memory`.
  absl::StatusOr<std::vector<Tensor>> Execute(
      const Mesh& mesh, v1::ShardOutputs* described,
      std::map<std::string, Tensor>* states,
      MemoryBudget::Reservation* reshard_memory);
  // The resharding's barrier (over `comm`, null for a one-device job) and
  // reservation (into `memory`).
  StateReshardHooks ReshardHooks(const v1::ShardJob& header, const Mesh& mesh,
                                 Communicator* comm,
                                 MemoryBudget::Reservation* memory) const;
  // The outputs' headers and digests (all in `response`), then the chunks
  // of the outputs the coordinator asked for, lent from `outputs` (which
  // the chunks keep alive until gRPC has sent them).
  absl::Status Send(v1::ShardResponse response,
                    std::shared_ptr<const std::vector<Tensor>> outputs);
  // The two-phase decision: commits the staged writes if told to.
  absl::Status Decide();

  const Options options_;
  const Services services_;
  ShardStream* const stream_;
  const absl::Time deadline_;
  ReceivedCall received_;
};

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_SHARD_JOB_H_
