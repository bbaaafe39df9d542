// The PeerTransport of one device of one job in a worker: shared memory to
// and from peers on the same host that agreed to it (ShmNetwork), gRPC
// (GrpcPeerTransport over the PeerNetwork) to and from every other peer,
// and to oneself.
//
// The sender picks the path per peer (ShmNetwork::SenderTo), so a receiver
// cannot know in advance which one a message takes: the first message
// from a peer may come over gRPC while the channel is being set up, and a
// peer that restarted may now use the other path. So Recv waits on the
// path the peer is known to use and keeps an eye on the other: while
// waiting on a shared-memory channel it looks into the gRPC inbox every
// few milliseconds, and while waiting on the inbox it moves to the channel
// as soon as one from that peer appears. Errors and their messages are
// those of the path the message was expected on.
//
// Thread-safe.
#ifndef SHARDMAP_WORKER_ROUTED_PEER_TRANSPORT_H_
#define SHARDMAP_WORKER_ROUTED_PEER_TRANSPORT_H_

#include "worker/shm_network.h"
#include "worker/transport/grpc/grpc_peer_transport.h"
#include "worker/transport/shm/shm_peer_transport.h"

namespace shardmap {

class RoutedPeerTransport final : public PeerTransport {
 public:
  // `shm` may be null (gRPC only). Both must outlive the transport.
  RoutedPeerTransport(PeerNetwork* network, ShmNetwork* shm,
                      GrpcPeerTransport::Options options);
  // Forgets the job's leftover messages on both paths.
  ~RoutedPeerTransport() override;

  int64_t device() const override { return options_.device; }
  int64_t num_devices() const override { return grpc_.num_devices(); }
  absl::Status Send(int64_t to, const PeerMessage& message,
                    absl::Span<const uint8_t> data) override;
  // Lent through shared memory when the peer's channel lends (the
  // receiver reads the buffer from this process), else lent to gRPC.
  absl::Status Lend(int64_t to, const PeerMessage& message,
                    absl::Span<const uint8_t> data) override;
  // Lent to gRPC; sent (copied) through shared memory.
  absl::Status LendUntilTaken(int64_t to, const PeerMessage& message,
                              absl::Span<const uint8_t> data) override;
  absl::Status Settle(bool abandon) override;
  absl::Status Recv(int64_t from, const PeerMessage& message,
                    absl::Span<uint8_t> out) override;
  // From the gRPC inbox's slices when no shared memory can carry the
  // peer's messages (--no-shm here), else through Recv into a buffer.
  absl::Status RecvChunks(int64_t from, const PeerMessage& message, size_t size,
                          const ChunkConsumer& consume) override;

 private:
  enum class Mode { kSend, kLend, kLendUntilTaken };
  absl::Status Post(int64_t to, const PeerMessage& message,
                    absl::Span<const uint8_t> data, Mode mode);

  // Whether the peer is another worker that shared memory may reach.
  bool MayShare(int64_t peer, const PeerMessage& message) const;
  // Whether a message from the peer may come through shared memory: never
  // with it off here (--no-shm), since then no peer can attach a ring.
  // (Sends still ask the peer once, see ShmNetwork.)
  bool MayReceiveShared(int64_t peer, const PeerMessage& message) const {
    return MayShare(peer, message) && shm_->enabled();
  }

  PeerNetwork* const network_;  // Not owned.
  ShmNetwork* const shm_;       // Not owned; may be null.
  const GrpcPeerTransport::Options options_;
  GrpcPeerTransport grpc_;
  ShmPeerTransport shm_transport_;
};

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_ROUTED_PEER_TRANSPORT_H_
