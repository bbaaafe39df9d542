// ReduceScatter: the input holds group.size() equal chunks; rank r ends with
// the reduction over all ranks of chunk r.
#ifndef SHARDMAP_WORKER_COLLECTIVES_REDUCE_SCATTER_H_
#define SHARDMAP_WORKER_COLLECTIVES_REDUCE_SCATTER_H_

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "worker/collectives/collective_types.h"
#include "worker/transport/peer_transport.h"

namespace shardmap {

struct ReduceScatterOptions {
  GroupView group;
  CollectiveTag tag;
  DType dtype = DType::kFloat32;
  // group.size() chunks of equal size, chunk r for rank r. Not modified.
  absl::Span<const uint8_t> input;
  // input.size() / group.size() bytes.
  absl::Span<uint8_t> output;
  ReduceOp op = ReduceOp::kSum;
  Algorithm algorithm = Algorithm::kAuto;
  size_t small_bytes = 64 << 10;
  size_t piece_bytes = 256 << 10;
};

absl::Status ReduceScatter(const ReduceScatterOptions& options,
                           PeerTransport& transport);

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_COLLECTIVES_REDUCE_SCATTER_H_
