#include "worker/inline_call.h"

#include <algorithm>
#include <cstdint>

#include "wire/chunking.h"

namespace shardmap {
namespace {

// The widest element a local built-in may output (float64, int64).
constexpr uint64_t kWidestItem = 8;

// A bound on the elements of any output of a local built-in on `job`'s
// arguments: the product of their element counts (each at least 1), which
// bounds an elementwise result with broadcasting and a matmul's alike;
// past `limit` it stops counting and returns limit + 1.
uint64_t OutputElementsBound(const v1::ShardJob& job, uint64_t limit) {
  uint64_t bound = 1;
  for (const v1::ArrayHeader& arg : job.args()) {
    uint64_t elements = 1;
    for (int64_t d : arg.shape()) {
      if (d <= 0) continue;  // counted as 1: the product stays a bound
      if (elements > limit / static_cast<uint64_t>(d)) return limit + 1;
      elements *= static_cast<uint64_t>(d);
    }
    if (bound > limit / elements) return limit + 1;
    bound *= elements;
  }
  return bound;
}

}  // namespace

bool RunsInline(const v1::ShardRequest& first, const ShardExecutor& executor,
                JobSequencer* sequencer) {
  if (!first.has_job()) return false;
  const v1::ShardJob& job = first.job();
  auto named = [](const auto& list) {
    return std::any_of(list.begin(), list.end(),
                       [](const auto& a) { return !a.name().empty(); });
  };
  // Without inline_outputs the answer's header leaves on its own, and may
  // wait for room on the link.
  if (!job.inline_outputs() || !job.program().empty() || job.two_phase() ||
      job.states_size() > 0 || job.state_out_specs_size() > 0 ||
      named(job.resident_args()) || named(job.resident_outputs())) {
    return false;
  }
  size_t bytes = 0;
  for (const v1::ArrayChunk& chunk : job.chunks()) bytes += chunk.data().size();
  if (bytes > kInlineChunkBytes || !executor.IsLocal(job.function())) {
    return false;
  }
  // Outputs small enough to leave inside the answer with the call's status
  // (ShardJob::Send): the call then never waits for room on the link.
  const uint64_t max_elements = kInlineChunkBytes / kWidestItem;
  if (OutputElementsBound(job, max_elements) > max_elements) return false;
  return sequencer == nullptr || job.worker_id().empty() ||
         sequencer->TurnIsNow(job.worker_id(), job.ticket());
}

}  // namespace shardmap
