#include "server/output_streaming.h"

#include <algorithm>
#include <utility>

#include "core/status_util.h"
#include "server/output_assembly.h"
#include "wire/chunking.h"

namespace shardmap {

absl::StatusOr<bool> StreamOutputs(
    const JobPlan& plan, const std::vector<WorkerPool::Worker>& workers,
    OutputBuffers& buffers, ResultSink& sink, absl::Time deadline,
    const OutputBuffers::Watch& watch) {
  SHARD_ASSIGN_OR_RETURN(const std::vector<DeviceResult> announced,
                         buffers.AwaitAnnounced(deadline, watch));
  if (!buffers.Streamable()) return false;
  std::vector<const DeviceResult*> devices;
  for (const DeviceResult& r : announced) devices.push_back(&r);
  std::vector<BlockLayout> layouts;
  SHARD_ASSIGN_OR_RETURN(const std::vector<JobOutput> outputs,
                         OutputHeaders(plan, workers, devices, &layouts));
  // One chunk or none would be held back for the call's status anyway.
  size_t returned = 0;
  for (const JobOutput& out : outputs) {
    if (out.stored_as.empty()) returned += out.meta.num_bytes();
  }
  if (returned <= kChunkBytes) return false;
  const absl::Status gone = absl::CancelledError("client went away");
  if (!sink.Begin(outputs)) return gone;
  for (size_t o = 0; o < outputs.size(); ++o) {
    if (!outputs[o].stored_as.empty()) continue;
    const size_t total = outputs[o].meta.num_bytes();
    for (size_t offset = 0; offset < total; offset += kChunkBytes) {
      const size_t size = std::min(kChunkBytes, total - offset);
      SHARD_ASSIGN_OR_RETURN(
          const uint8_t* data,
          buffers.AwaitPlaced(o, offset + size, deadline, watch));
      if (!sink.Chunk(static_cast<uint32_t>(o), offset, data + offset, size)) {
        return gone;
      }
    }
  }
  return true;
}

}  // namespace shardmap
