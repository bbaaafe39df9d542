#include "worker/inline_call.h"

#include <algorithm>

#include "wire/chunking.h"

namespace shardmap {

bool RunsInline(const v1::ShardRequest& first, const ShardExecutor& executor,
                JobSequencer* sequencer) {
  if (!first.has_job()) return false;
  const v1::ShardJob& job = first.job();
  auto named = [](const auto& list) {
    return std::any_of(list.begin(), list.end(),
                       [](const auto& a) { return !a.name().empty(); });
  };
  if (!job.program().empty() || job.two_phase() || job.states_size() > 0 ||
      job.state_out_specs_size() > 0 || named(job.resident_args()) ||
      named(job.resident_outputs())) {
    return false;
  }
  size_t bytes = 0;
  for (const v1::ArrayChunk& chunk : job.chunks()) bytes += chunk.data().size();
  if (bytes > kInlineChunkBytes || !executor.IsLocal(job.function())) {
    return false;
  }
  return sequencer == nullptr || job.worker_id().empty() ||
         sequencer->TurnIsNow(job.worker_id(), job.ticket());
}

}  // namespace shardmap
