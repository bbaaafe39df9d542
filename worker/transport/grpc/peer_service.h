// The Peer service every worker serves: one reactor per incoming stream,
// handing each frame to the PeerInbox. Glue only; the inbox owns the logic.
//
// It is served as a generic (byte buffer) service so frames are decoded
// without protobuf copies of their payloads
// (worker/transport/grpc/peer_frame.h); the wire format is still
// shardmap.v1.Peer/Exchange of PeerFrame. Register it with
// ServerBuilder::RegisterCallbackGenericService; every other method a generic
// service would catch gets UNIMPLEMENTED.
#ifndef SHARDMAP_WORKER_PEER_SERVICE_H_
#define SHARDMAP_WORKER_PEER_SERVICE_H_

#include <grpcpp/generic/async_generic_service.h>

#include "worker/transport/grpc/peer_inbox.h"

namespace shardmap {

class PeerService final : public grpc::CallbackGenericService {
 public:
  explicit PeerService(PeerInbox* inbox) : inbox_(inbox) {}
  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext* context) override;

 private:
  PeerInbox* const inbox_;  // Not owned.
};

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_PEER_SERVICE_H_
