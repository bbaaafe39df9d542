// The coordinator's unary calls to workers about resident blocks: drop,
// save to a file, load from a file. gRPC glue on the process's
// ChannelCache; every call carries its caller's deadline (DEADLINE_EXCEEDED
// when it passes) and reports a transport failure to the cache.
// Thread-safe.
#ifndef SHARDMAP_SERVER_WORKER_CALLS_H_
#define SHARDMAP_SERVER_WORKER_CALLS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "rpc/channel_cache.h"
#include "shardmap/v1/worker.grpc.pb.h"

namespace shardmap {

class WorkerCalls {
 public:
  // Not owned; outlives the calls.
  explicit WorkerCalls(ChannelCache* channels) : channels_(channels) {}

  // Drops `version` of `name` on the worker, or every version of it when
  // `version` is 0. Errors: the worker's, UNAVAILABLE if it cannot be
  // reached, DEADLINE_EXCEEDED at `deadline`.
  absl::Status DropArray(const std::string& address, const std::string& name,
                         absl::Time deadline, uint64_t version = 0);
  // Returns the block's digest. Errors as DropArray.
  absl::StatusOr<uint64_t> SaveBlock(const std::string& address,
                                     const v1::SaveBlockRequest& request,
                                     absl::Time deadline);
  // Errors as DropArray.
  absl::Status LoadBlock(const std::string& address,
                         const v1::LoadBlockRequest& request,
                         absl::Time deadline);

 private:
  // Calls `method` of the Worker stub of `address` with a context bounded
  // by `deadline`.
  template <typename Request, typename Response, typename Method>
  absl::Status Call(const std::string& address, Method method,
                    const Request& request, Response* response,
                    absl::Time deadline);

  ChannelCache* const channels_;
};

}  // namespace shardmap

#endif  // SHARDMAP_SERVER_WORKER_CALLS_H_
