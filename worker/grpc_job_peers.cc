#include "worker/grpc_job_peers.h"

#include "worker/routed_peer_transport.h"

namespace shardmap {

uint64_t GrpcJobPeers::incarnation() const {
  return network_ != nullptr ? network_->incarnation() : 0;
}

std::string GrpcJobPeers::my_address() const {
  return network_ != nullptr ? network_->my_address() : "";
}

std::unique_ptr<PeerTransport> GrpcJobPeers::Open(const v1::ShardJob& header,
                                                  const Link& link) {
  if (network_ == nullptr) return nullptr;
  GrpcPeerTransport::Options t;
  t.job_id = header.job_id();
  t.device = header.device_id();
  t.addresses.assign(header.device_addresses().begin(),
                     header.device_addresses().end());
  t.incarnations.assign(header.device_incarnations().begin(),
                        header.device_incarnations().end());
  t.deadline = link.deadline;
  t.collective_timeout = link.collective_timeout;
  t.aborted = link.aborted;
  return std::make_unique<RoutedPeerTransport>(network_, shm_, std::move(t));
}

absl::StatusOr<std::string> GrpcJobPeers::ReadBlock(
    const std::string& address, const v1::ReadBlockRequest& request,
    absl::Time deadline) {
  return reader_.Read(address, request, deadline);
}

}  // namespace shardmap
