#include "server/output_streaming.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "core/status_util.h"
#include "server/output_assembly.h"
#include "wire/chunking.h"

namespace shardmap {

// A job that returns more than one chunk may stream; one that returns less
// may go inside its result (job_stream.h ResultWriter::Answer): never both.
static_assert(kInlineChunkBytes <= kChunkBytes);

bool MayStreamOutputs(const JobPlan& plan, bool keyed) {
  const bool resident_args =
      std::any_of(plan.args.begin(), plan.args.end(),
                  [](const ArgPlan& a) { return a.resident.has_value(); });
  return !keyed && !plan.donates() && !resident_args && plan.states.empty() &&
         !plan.writes_residents() && plan.reads().empty() &&
         plan.writes().empty();
}

absl::StatusOr<std::optional<std::vector<JobOutput>>> StreamOutputs(
    const JobPlan& plan, const std::vector<WorkerPool::Worker>& workers,
    OutputBuffers& buffers, ResultSink& sink, absl::Time deadline,
    const OutputBuffers::Watch& watch) {
  // One chunk or none would be held back for the call's status anyway.
  SHARD_ASSIGN_OR_RETURN(
      const std::optional<std::vector<const DeviceResult*>> announced,
      buffers.AwaitStreamable(kChunkBytes, deadline, watch));
  if (!announced.has_value()) return std::nullopt;
  std::vector<BlockLayout> layouts;
  SHARD_ASSIGN_OR_RETURN(std::vector<JobOutput> outputs,
                         OutputHeaders(plan, workers, *announced, &layouts));
  const absl::Status gone = absl::CancelledError("client went away");
  if (!sink.Begin(outputs)) return gone;
  for (size_t o = 0; o < outputs.size(); ++o) {
    if (!outputs[o].stored_as.empty()) continue;
    // Each chunk goes as soon as the devices' bytes it holds are placed.
    absl::Status placed;
    const std::shared_ptr<const Tensor> whole = buffers.Lend(o);
    const bool sent = LendBytesChunks(
        static_cast<uint32_t>(o), whole->data(), outputs[o].meta.num_bytes(),
        whole,
        [&sink](LentChunk&& chunk) { return sink.Chunk(std::move(chunk)); },
        [&](size_t offset, size_t length) {
          placed = buffers.AwaitPlaced(o, offset + length, deadline, watch);
          return placed.ok();
        });
    SHARD_RETURN_IF_ERROR(placed);
    if (!sent) return gone;
  }
  return std::optional<std::vector<JobOutput>>(std::move(outputs));
}

}  // namespace shardmap
