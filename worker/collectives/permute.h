// Permute (jax.lax.ppermute): for each (source, destination) pair of group
// ranks, the destination receives the source's block. A rank that is no
// pair's destination gets zeros.
#ifndef SHARDMAP_WORKER_COLLECTIVES_PERMUTE_H_
#define SHARDMAP_WORKER_COLLECTIVES_PERMUTE_H_

#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "worker/collectives/collective_types.h"
#include "worker/collectives/exchange.h"
#include "worker/transport/peer_transport.h"

namespace shardmap {

struct PermuteOptions {
  GroupView group;
  CollectiveTag tag;
  // Pairs of group ranks; every source and every destination at most once,
  // all in [0, group.size()).
  std::vector<std::pair<int, int>> pairs;
  absl::Span<const uint8_t> input;
  absl::Span<uint8_t> output;  // input.size() bytes
  // How the block travels (pieces, window); the same on every rank.
  ExchangeOptions exchange;
};

// INVALID_ARGUMENT for a repeated source or destination or a rank out of
// range (checked the same on every rank, before any message is sent).
absl::Status Permute(const PermuteOptions& options, PeerTransport& transport);

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_COLLECTIVES_PERMUTE_H_
