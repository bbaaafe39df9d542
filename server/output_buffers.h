// The whole arrays of a job's returned outputs, filled straight from the
// devices' output chunks: each device's block is placed where it belongs
// in the whole output as its chunks arrive, so the coordinator never holds
// a device's block and the whole output at once, and assembling the
// output copies nothing more.
//
// It also tells how far each output has filled, so the job can stream it
// on to its client while the devices still send (cut-through): a device
// sends its block in C order, which is increasing order in the whole
// array too, so everything before the first byte a representative device
// has not sent yet is in. The waits for that run on the job's thread and
// wake every `poll` to run `watch` (the fan-out's check of the client and
// the workers), so a stopped worker ends them as it ends the job.
//
// Thread-safe: the devices of a job ask for their sinks concurrently and
// write disjoint parts of each output; one thread waits.
#ifndef SHARDMAP_SERVER_OUTPUT_BUFFERS_H_
#define SHARDMAP_SERVER_OUTPUT_BUFFERS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/block_math.h"
#include "core/tensor.h"
#include "server/job_results.h"
#include "server/planner.h"
#include "wire/chunking.h"

namespace shardmap {

class OutputBuffers {
 public:
  // How a wait keeps watch: every `poll` it runs `watch` (may be null).
  struct Watch {
    absl::Duration poll = absl::Milliseconds(100);
    std::function<void()> watch;
  };

  // Outputs of `plan`, which with the job's arguments may total at most
  // `max_job_bytes`: an output that would pass it is not allocated (its
  // devices keep their blocks, and the job is refused as they arrive).
  OutputBuffers(const JobPlan& plan, uint64_t max_job_bytes);

  // A sink that places device `d`'s block of output `o` (the block its
  // header announced) into the whole output, which the first block asked
  // for allocates. Null when the block differs in shape or dtype from the
  // first one, or when no whole output can be made from it: the device then
  // keeps its block, and the assembly reports the problem.
  ChunkSequencer::Sink SinkFor(size_t o, int64_t d, const ArrayMeta& block);

  // Device `d` has asked for the sinks of its returned outputs; `headers`
  // holds its blocks' headers and digests (its blocks are not kept).
  void Announce(int64_t d, const DeviceResult& headers);
  // Device `d`'s call returned successfully.
  void Finished(int64_t d);
  // Ends every wait, present and future, with `why` (a device failed);
  // the first error stays.
  void Stop(absl::Status why);

  // Waits until the outputs can stream: every device announced, every
  // returned output has its whole array with every representative block
  // going into it, and they return more than `min_bytes` in all. Returns
  // the devices' announced headers, by device (kept here, unchanged, for
  // the life of the buffers); nullopt once they cannot (a block left out:
  // the assembly judges it) or, when every device finished, need not.
  // Errors: Stop's, DEADLINE_EXCEEDED at `deadline`.
  absl::StatusOr<std::optional<std::vector<const DeviceResult*>>>
  AwaitStreamable(size_t min_bytes, absl::Time deadline, const Watch& watch);
  // Waits until bytes [0, end) of the whole output `o` (once streamable)
  // are in. Errors as AwaitStreamable.
  absl::Status AwaitPlaced(size_t o, size_t end, absl::Time deadline,
                           const Watch& watch);
  // The whole output `o`, once streamable, to lend its bytes: read only
  // what AwaitPlaced said is in. It lives as long as the last holder.
  std::shared_ptr<const Tensor> Lend(size_t o);

  // The whole output `o` that the sinks filled; nullopt if none was made.
  // Only once every sink's writing has ended, and never after Lend.
  std::optional<Tensor> Take(size_t o);

 private:
  struct Output {
    bool tried = false;
    ArrayMeta block;
    std::optional<BlockLayout> layout;
    std::shared_ptr<Tensor> whole;  // null until the first block asks
    // A representative device's block did not get a sink.
    bool unplaced = false;
    // The devices whose blocks make up the output (representatives).
    std::vector<int64_t> senders;
    // Per device: where its block goes, once it asked, and its bytes in.
    std::vector<std::optional<BlockRegion>> regions;
    std::vector<size_t> placed;
  };

  // Waits for `cond` until `deadline`, running the watch every poll.
  // False at the deadline. Called with mu_ held.
  bool AwaitLocked(const absl::Condition& cond, absl::Time deadline,
                   const Watch& watch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Every device announced, and every returned output can stream.
  bool StreamableLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The bytes of the returned outputs' whole arrays.
  size_t ReturnedBytesLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // How many bytes from the start of output `o` are in.
  size_t PlacedPrefix(size_t o) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const JobPlan& plan_;
  const int64_t num_devices_;
  absl::Mutex mu_;
  uint64_t budget_ ABSL_GUARDED_BY(mu_);  // bytes left for whole outputs
  std::vector<Output> outputs_ ABSL_GUARDED_BY(mu_);
  // By device: the headers it announced (its blocks are not kept).
  std::vector<std::optional<DeviceResult>> announced_ ABSL_GUARDED_BY(mu_);
  int64_t num_announced_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t num_finished_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status stopped_ ABSL_GUARDED_BY(mu_);
};

}  // namespace shardmap

#endif  // SHARDMAP_SERVER_OUTPUT_BUFFERS_H_
