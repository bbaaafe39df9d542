// The wire form of a peer frame, without protobuf copies of the payload.
//
// On the wire a frame is exactly a serialized v1::PeerFrame whose `data`
// field (11) comes last, so any protobuf client can speak the protocol.
// EncodeFrame serializes the small header and appends the payload as its
// own slice; DecodeFrame parses the header and keeps the payload as
// references to the received slices, so it is copied once, by whoever
// finally consumes it. A frame whose `data` field is not last (legal
// protobuf, never sent by shardmap) is decoded through a full parse.
#ifndef SHARDMAP_WORKER_PEER_FRAME_H_
#define SHARDMAP_WORKER_PEER_FRAME_H_

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "shardmap/v1/peer.pb.h"

namespace shardmap {

// The one method of the Peer service (proto/shardmap/v1/peer.proto).
inline constexpr char kPeerExchangeMethod[] = "/shardmap.v1.Peer/Exchange";

// Bytes held by reference in gRPC slices. Cheap to move; copies share the
// slices.
class PeerPayload {
 public:
  PeerPayload() = default;
  explicit PeerPayload(std::vector<grpc::Slice> slices);

  size_t size() const { return size_; }
  // Copies all size() bytes to `out`, which must have room for them.
  void CopyTo(uint8_t* out) const;
  const std::vector<grpc::Slice>& slices() const { return slices_; }

 private:
  std::vector<grpc::Slice> slices_;
  size_t size_ = 0;
};

struct DecodedFrame {
  v1::PeerFrame header;  // every field but `data`, which is empty
  PeerPayload payload;
};

// `header` must have an empty `data` field; `payload` is copied once, into
// a slice the returned buffer owns.
grpc::ByteBuffer EncodeFrame(const v1::PeerFrame& header,
                             absl::Span<const uint8_t> payload);
// As above, with the payload already a slice: the buffer references it
// (e.g. a LentSlices slice over the caller's memory, sent without a copy).
grpc::ByteBuffer EncodeFrame(const v1::PeerFrame& header, grpc::Slice payload);

// INVALID_ARGUMENT if `buffer` is not a serialized PeerFrame.
absl::StatusOr<DecodedFrame> DecodeFrame(const grpc::ByteBuffer& buffer);

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_PEER_FRAME_H_
