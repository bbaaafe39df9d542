// WorkerConnector over gRPC, on the process's ChannelCache: one channel per
// worker address, reused across jobs. Small calls (OpenSmall) share each
// worker's long-lived job link (server/shard_link.h); others open a
// RunShard stream each. A call whose transport failed
// (UNAVAILABLE with the channel not connected) evicts its channel, so the
// next call dials afresh rather than wait out the old channel's reconnect
// backoff (a worker that restarted at the same address is reachable at
// once); an UNAVAILABLE the worker answered itself keeps it. Thread-safe.
#ifndef SHARDMAP_SERVER_GRPC_WORKER_CONNECTOR_H_
#define SHARDMAP_SERVER_GRPC_WORKER_CONNECTOR_H_

#include <memory>
#include <string>

#include "rpc/channel_cache.h"
#include "server/shard_channel.h"
#include "server/shard_link.h"
#include "shardmap/v1/worker.grpc.pb.h"

namespace shardmap {

class GrpcWorkerConnector final : public WorkerConnector {
 public:
  // Not owned; outlives the connector.
  explicit GrpcWorkerConnector(ChannelCache* channels)
      : channels_(channels), links_(channels) {}
  std::unique_ptr<ShardChannel> Open(const std::string& address,
                                     absl::Time deadline) override;
  std::unique_ptr<ShardChannel> OpenSmall(const std::string& address,
                                          absl::Time deadline) override;
  std::unique_ptr<ShardChannel> OpenSmallIfUp(const std::string& address,
                                              absl::Time deadline) override;
  // A worker with no link up gets one started, for the calls after this.
  bool SmallReady(const std::string& address, absl::Time deadline) override {
    if (links_.Ready(address, deadline)) return true;
    links_.Prepare(address, deadline);
    return false;
  }
  absl::Status SkipTickets(const std::string& address,
                           const v1::SkipTicketsRequest& request,
                           absl::Time deadline) override;
  absl::Status DropVersion(const std::string& address, const std::string& name,
                           uint64_t version, absl::Time deadline) override;

 private:
  // One unary call with `deadline`; a transport failure evicts the
  // channel (ChannelCache::OnCallEnded).
  template <typename Request, typename Response>
  absl::Status Unary(const std::string& address, absl::Time deadline,
                     grpc::Status (v1::Worker::Stub::*method)(
                         grpc::ClientContext*, const Request&, Response*),
                     const Request& request);

  ChannelCache* const channels_;
  ShardLinks links_;
};

}  // namespace shardmap

#endif  // SHARDMAP_SERVER_GRPC_WORKER_CONNECTOR_H_
