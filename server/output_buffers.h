// The whole arrays of a job's returned outputs, filled straight from the
// devices' output chunks: each device's block is placed where it belongs
// in the whole output as its chunks arrive, so the coordinator never holds
// a device's block and the whole output at once, and assembling the
// output copies nothing more.
//
// Thread-safe: the devices of a job ask for their sinks concurrently and
// write disjoint parts of each output.
#ifndef SHARDMAP_SERVER_OUTPUT_BUFFERS_H_
#define SHARDMAP_SERVER_OUTPUT_BUFFERS_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "core/block_math.h"
#include "core/tensor.h"
#include "server/planner.h"
#include "wire/chunking.h"

namespace shardmap {

class OutputBuffers {
 public:
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

  // The whole output `o` that the sinks filled; nullopt if none was made.
  // Only once every sink's writing has ended.
  std::optional<Tensor> Take(size_t o);

 private:
  struct Output {
    bool tried = false;
    ArrayMeta block;
    std::optional<BlockLayout> layout;
    std::optional<Tensor> whole;
  };

  const JobPlan& plan_;
  absl::Mutex mu_;
  uint64_t budget_ ABSL_GUARDED_BY(mu_);  // bytes left for whole outputs
  std::vector<Output> outputs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace shardmap

#endif  // SHARDMAP_SERVER_OUTPUT_BUFFERS_H_
