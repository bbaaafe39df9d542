// One device's part of a job, over one ShardChannel: the wire protocol
// between the coordinator and the worker running that device. Sends the
// job header (ShardJob in proto/shardmap/v1/worker.proto) and the device's
// argument blocks as chunks, then reads the worker's ShardOutputs and the
// chunks of the outputs the coordinator keeps. A two-phase job (one that writes
// resident arrays) leaves the stream open; SendDecision ends it.
//
// Thread-compatible: one call per channel; calls of a job's devices may
// run concurrently (they share only ShardCallContext, whose byte counter
// is atomic).
#ifndef SHARDMAP_SERVER_SHARD_CALL_H_
#define SHARDMAP_SERVER_SHARD_CALL_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/tensor.h"
#include "server/arriving_inputs.h"
#include "server/job_results.h"
#include "server/output_buffers.h"
#include "server/planner.h"
#include "server/shard_channel.h"
#include "server/worker_pool.h"

namespace shardmap {

// What the calls of one job's devices share. Not owned; must outlive the
// calls.
struct ShardCallContext {
  const std::vector<WorkerPool::Worker>* workers;  // by device
  const std::vector<uint64_t>* tickets;            // by device
  absl::Duration collective_timeout;
  const std::vector<uint64_t>* output_versions;  // per output (0: returned)
  const std::vector<uint64_t>* state_versions;   // per state (0: read only)
  bool two_phase;
  uint64_t epoch;  // this coordinator's start
  // Returned output bytes received so far, by all devices; with the job's
  // argument bytes they must stay under max_job_bytes.
  std::atomic<uint64_t>* returned_bytes;
  uint64_t max_job_bytes;
  // The job's deadline: the longest a device waits for the client's bytes.
  absl::Time deadline;
  // Where returned outputs' chunks go (null: a block per device).
  OutputBuffers* outputs = nullptr;
};

// The id a worker's tickets count under (ShardJob.worker_id). Tickets
// count per (worker, coordinator start): a restarted coordinator numbers
// its workers from w0 again, and its tickets from 0.
std::string TicketOwner(const WorkerPool::Worker& w, uint64_t epoch);

// Device `d` of `plan` over `ch`, in two halves, so that a caller may send
// several devices' requests before it reads their answers. `inputs` are
// the whole arguments, which may still be arriving: each piece goes out
// once its bytes are in. SendShardCall sends the request: false if the
// stream broke (ReceiveShardCall, given `sent`, then says why); an error
// if the arguments failed (ArrivingInputs::Await). ReceiveShardCall reads
// the answer. Errors: the stream's final status (the worker's error,
// CANCELLED, DEADLINE_EXCEEDED, UNAVAILABLE), INTERNAL for a worker that
// breaks the protocol, INVALID_ARGUMENT for malformed output headers or
// chunks, RESOURCE_EXHAUSTED when the returned outputs pass
// max_job_bytes. On an error the stream is finished (cancelled if the
// worker may still talk).
absl::StatusOr<bool> SendShardCall(const std::string& job_id,
                                   const JobPlan& plan, int64_t d,
                                   const ShardCallContext& context,
                                   const ArrivingInputs& inputs,
                                   ShardChannel& ch);
absl::StatusOr<DeviceResult> ReceiveShardCall(const JobPlan& plan, int64_t d,
                                              const ShardCallContext& context,
                                              bool sent, ShardChannel& ch);

// Sends a two-phase job's decision (apply or drop its writes) and ends the
// stream. Returns its final status: an error when the worker could not
// apply them.
absl::Status SendDecision(ShardChannel& ch, bool commit);
// SendDecision in its two halves: WriteDecision sends it (false: the
// stream broke), EndDecision waits for the stream's end and returns
// its final status.
bool WriteDecision(ShardChannel& ch, bool commit);
absl::Status EndDecision(ShardChannel& ch);

}  // namespace shardmap

#endif  // SHARDMAP_SERVER_SHARD_CALL_H_
