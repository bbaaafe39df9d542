// AllToAll: the input holds group.size() equal chunks; chunk j goes to rank
// j, and the output holds, at position j, the chunk rank j sent here.
#ifndef SHARDMAP_WORKER_COLLECTIVES_ALL_TO_ALL_H_
#define SHARDMAP_WORKER_COLLECTIVES_ALL_TO_ALL_H_

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "worker/collectives/collective_types.h"
#include "worker/collectives/exchange.h"
#include "worker/transport/peer_transport.h"

namespace shardmap {

struct AllToAllOptions {
  GroupView group;
  CollectiveTag tag;
  absl::Span<const uint8_t> input;  // group.size() equal chunks
  // input.size() bytes, not overlapping the input.
  absl::Span<uint8_t> output;
  // How each chunk travels (pieces, window); the same on every rank.
  ExchangeOptions exchange;
};

absl::Status AllToAll(const AllToAllOptions& options, PeerTransport& transport);

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_COLLECTIVES_ALL_TO_ALL_H_
