// The worker's JobPeers: collectives over the peer network (gRPC, and
// shared memory to co-located peers that agreed to it, see
// worker/routed_peer_transport.h) and resident block reads over the other
// workers' ReadBlock.
//
// Thread-safe.
#ifndef SHARDMAP_WORKER_GRPC_JOB_PEERS_H_
#define SHARDMAP_WORKER_GRPC_JOB_PEERS_H_

#include "worker/job_peers.h"
#include "worker/shm_network.h"
#include "worker/store/block_reader.h"
#include "worker/transport/grpc/grpc_peer_transport.h"

namespace shardmap {

class GrpcJobPeers final : public JobPeers {
 public:
  // `network` may be null: jobs then run without collectives. `shm` may be
  // null: gRPC only. `channels` serves block reads. Not owned.
  GrpcJobPeers(PeerNetwork* network, ShmNetwork* shm, ChannelCache* channels)
      : network_(network), shm_(shm), reader_(channels) {}

  uint64_t incarnation() const override;
  std::string my_address() const override;
  std::unique_ptr<PeerTransport> Open(const v1::ShardJob& header,
                                      const Link& link) override;
  absl::StatusOr<std::string> ReadBlock(const std::string& address,
                                        const v1::ReadBlockRequest& request,
                                        absl::Time deadline) override;

 private:
  PeerNetwork* const network_;  // Not owned.
  ShmNetwork* const shm_;       // Not owned.
  BlockReader reader_;
};

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_GRPC_JOB_PEERS_H_
