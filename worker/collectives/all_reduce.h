// AllReduce: every rank of the group ends with the elementwise reduction
// (sum, max or min) of all ranks' arrays.
#ifndef SHARDMAP_WORKER_COLLECTIVES_ALL_REDUCE_H_
#define SHARDMAP_WORKER_COLLECTIVES_ALL_REDUCE_H_

#include <cstddef>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "worker/collectives/collective_types.h"
#include "worker/transport/peer_transport.h"

namespace shardmap {

struct AllReduceOptions {
  GroupView group;
  CollectiveTag tag;
  DType dtype = DType::kFloat32;
  // The array, reduced in place: the same number of bytes on every rank, a
  // whole number of elements (may be zero).
  absl::Span<uint8_t> data;
  // If not empty: the array is read from here instead, and `data` (of the
  // same size, overlapping neither) receives the result without being read
  // first (it may hold anything). Saves copying the input into `data`.
  absl::Span<const uint8_t> input;
  ReduceOp op = ReduceOp::kSum;
  Algorithm algorithm = Algorithm::kAuto;
  // Arrays of at most this many bytes use recursive doubling (latency
  // bound); larger ones the ring (bandwidth bound).
  size_t small_bytes = 64 << 10;
  // The ring moves each rank's segment in pieces of at most this many
  // bytes, so sending, receiving and reducing overlap...
  size_t piece_bytes = 1 << 20;
  // ...and sends at most this many pieces ahead of those it received: two
  // 1 MiB pieces keep a gRPC link busy while the receiver combines, and
  // fit a shared-memory ring without spilling (more only costs memory).
  int window = 2;
};

// INVALID_ARGUMENT for a malformed group or a size that is not a whole
// number of elements; otherwise the transport's errors.
absl::Status AllReduce(const AllReduceOptions& options,
                       PeerTransport& transport);

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_COLLECTIVES_ALL_REDUCE_H_
