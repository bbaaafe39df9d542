// WorkerConnector over gRPC: one channel per worker address, reused across
// jobs. A call that fails with UNAVAILABLE drops its channel, so the next
// call dials afresh rather than wait out the old channel's reconnect
// backoff (a worker that restarted at the same address is reachable at
// once). Thread-safe.
#ifndef SHARDMAP_SERVER_GRPC_WORKER_CONNECTOR_H_
#define SHARDMAP_SERVER_GRPC_WORKER_CONNECTOR_H_

#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/shard_channel.h"
#include "shardmap/v1/worker.grpc.pb.h"

namespace shardmap {

class GrpcWorkerConnector final : public WorkerConnector {
 public:
  std::unique_ptr<ShardChannel> Open(const std::string& address,
                                     absl::Time deadline) override;
  absl::Status SkipTickets(const std::string& address,
                           const v1::SkipTicketsRequest& request,
                           absl::Time deadline) override;
  absl::Status DropVersion(const std::string& address, const std::string& name,
                           uint64_t version, absl::Time deadline) override;

 private:
  std::shared_ptr<v1::Worker::Stub> Stub(const std::string& address);
  // One unary call with `deadline`; UNAVAILABLE drops the channel.
  template <typename Request, typename Response>
  absl::Status Unary(const std::string& address, absl::Time deadline,
                     grpc::Status (v1::Worker::Stub::*method)(
                         grpc::ClientContext*, const Request&, Response*),
                     const Request& request);
  // Drops the cached channel of `address` if it is still `stub`'s.
  void Forget(const std::string& address, const v1::Worker::Stub* stub);

  absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<v1::Worker::Stub>> stubs_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace shardmap

#endif  // SHARDMAP_SERVER_GRPC_WORKER_CONNECTOR_H_
