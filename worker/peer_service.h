// The Peer service every worker serves: one reactor per incoming stream,
// handing each frame to the PeerInbox. Glue only; the inbox owns the logic.
#ifndef SHARDMAP_WORKER_PEER_SERVICE_H_
#define SHARDMAP_WORKER_PEER_SERVICE_H_

#include "shardmap/v1/peer.grpc.pb.h"
#include "worker/peer_inbox.h"

namespace shardmap {

class PeerService final : public v1::Peer::CallbackService {
 public:
  explicit PeerService(PeerInbox* inbox) : inbox_(inbox) {}
  grpc::ServerBidiReactor<v1::PeerFrame, v1::PeerAck>* Exchange(
      grpc::CallbackServerContext* context) override;

 private:
  PeerInbox* const inbox_;  // Not owned.
};

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_PEER_SERVICE_H_
