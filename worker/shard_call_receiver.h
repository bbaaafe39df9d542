// Receives one device's job from its RunShard stream: the header, then the
// argument chunks, checked against the job's byte limit and reserved in the
// worker's memory budget before anything is allocated.
#ifndef SHARDMAP_WORKER_SHARD_CALL_RECEIVER_H_
#define SHARDMAP_WORKER_SHARD_CALL_RECEIVER_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "shardmap/v1/worker.pb.h"
#include "worker/memory_budget.h"
#include "worker/shard_executor.h"
#include "worker/shard_stream.h"

namespace shardmap {

// What a job brings to this device.
struct ReceivedCall {
  // The header without its argument headers; set as soon as it is read,
  // so a receive that fails later still knows the job's ticket.
  v1::ShardJob header;
  // The call for the executor: resident arguments are empty placeholders,
  // fetched at the job's turn.
  ShardCall call;
  // Which outputs the coordinator wants back (all, if shorter).
  std::vector<bool> send_outputs;
  // The argument and resident block bytes, held for the job's life.
  MemoryBudget::Reservation arguments_memory;
};

// Reads the header and every argument chunk into `received`; stops at the
// last argument byte (a two-phase job's stream stays open for the
// decision). `budget` may be null (no budget). Errors: INVALID_ARGUMENT
// for a stream that does not start with a ShardJob, a second ShardJob, a
// bad mesh, header or chunk (naming the argument); RESOURCE_EXHAUSTED over
// `max_job_bytes` or the budget.
absl::Status ReceiveCall(ShardStream& stream, uint64_t max_job_bytes,
                         MemoryBudget* budget, ReceivedCall* received);

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_SHARD_CALL_RECEIVER_H_
