#include "server/output_streaming.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "core/status_util.h"
#include "server/output_assembly.h"
#include "wire/chunking.h"

namespace shardmap {

bool MayStreamOutputs(const JobPlan& plan, bool keyed) {
  const bool donates = std::any_of(plan.args.begin(), plan.args.end(),
                                   [](const ArgPlan& a) { return a.donated; });
  const bool resident_args =
      std::any_of(plan.args.begin(), plan.args.end(),
                  [](const ArgPlan& a) { return a.resident.has_value(); });
  return !keyed && !donates && !resident_args && plan.states.empty() &&
         !plan.writes_residents() && plan.reads().empty() &&
         plan.writes().empty();
}

absl::StatusOr<bool> StreamOutputs(
    const JobPlan& plan, const std::vector<WorkerPool::Worker>& workers,
    OutputBuffers& buffers, ResultSink& sink, absl::Time deadline,
    const OutputBuffers::Watch& watch) {
  // One chunk or none would be held back for the call's status anyway.
  SHARD_ASSIGN_OR_RETURN(
      const std::optional<std::vector<DeviceResult>> announced,
      buffers.AwaitStreamable(kChunkBytes, deadline, watch));
  if (!announced.has_value()) return false;
  std::vector<const DeviceResult*> devices;
  for (const DeviceResult& r : *announced) devices.push_back(&r);
  std::vector<BlockLayout> layouts;
  SHARD_ASSIGN_OR_RETURN(const std::vector<JobOutput> outputs,
                         OutputHeaders(plan, workers, devices, &layouts));
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
