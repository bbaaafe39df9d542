// Where a worker's rank comes from, first match wins: --rank N,
// --rank-from-hostname (the trailing -<n> of the host name, as StatefulSet
// pods and Indexed Job pods are named), then the environment:
// SHARDMAP_RANK, JOB_COMPLETION_INDEX (Kubernetes Indexed Job),
// LWS_WORKER_INDEX (LeaderWorkerSet). No source: no rank (the coordinator
// places the worker in registration order).
#ifndef SHARDMAP_WORKER_RANK_H_
#define SHARDMAP_WORKER_RANK_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace shardmap {

struct RankSources {
  std::optional<int64_t> flag;  // --rank
  bool from_hostname = false;   // --rank-from-hostname
  std::string hostname;
  // Reads an environment variable; nullopt when unset.
  std::function<std::optional<std::string>(const char*)> getenv;
};

// INVALID_ARGUMENT naming the source when it is not a rank (a negative
// number, text, a host name without a trailing -<n>).
absl::StatusOr<std::optional<int64_t>> ResolveRank(const RankSources& sources);

// The process's own sources: the real environment and gethostname().
RankSources SystemRankSources(std::optional<int64_t> flag, bool from_hostname);

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_RANK_H_
