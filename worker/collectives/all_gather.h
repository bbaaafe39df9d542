// AllGather: every rank ends with all ranks' blocks, concatenated in group
// rank order.
#ifndef SHARDMAP_WORKER_COLLECTIVES_ALL_GATHER_H_
#define SHARDMAP_WORKER_COLLECTIVES_ALL_GATHER_H_

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "worker/collectives/collective_types.h"
#include "worker/collectives/exchange.h"
#include "worker/transport/peer_transport.h"

namespace shardmap {

struct AllGatherOptions {
  GroupView group;
  CollectiveTag tag;
  // This rank's block; the same size on every rank (may be zero).
  absl::Span<const uint8_t> input;
  // group.size() * input.size() bytes: block r at offset r * input.size().
  absl::Span<uint8_t> output;
  Algorithm algorithm = Algorithm::kAuto;
  size_t small_bytes = 64 << 10;  // total output at most this: direct exchange
  // How the ring moves each block (pieces, window); the same on every rank.
  ExchangeOptions exchange;
};

absl::Status AllGather(const AllGatherOptions& options,
                       PeerTransport& transport);

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_COLLECTIVES_ALL_GATHER_H_
