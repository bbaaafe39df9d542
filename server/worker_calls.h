// The coordinator's unary calls to workers about resident blocks: drop,
// save to a file, load from a file. gRPC glue, one cached channel per
// address, every call with a deadline. Thread-safe.
#ifndef SHARDMAP_SERVER_WORKER_CALLS_H_
#define SHARDMAP_SERVER_WORKER_CALLS_H_

#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "shardmap/v1/worker.grpc.pb.h"

namespace shardmap {

class WorkerCalls {
 public:
  absl::Status DropArray(const std::string& address, const std::string& name);
  // Returns the block's digest.
  absl::StatusOr<uint64_t> SaveBlock(const std::string& address,
                                     const v1::SaveBlockRequest& request);
  absl::Status LoadBlock(const std::string& address,
                         const v1::LoadBlockRequest& request);

 private:
  std::shared_ptr<v1::Worker::Stub> Stub(const std::string& address);
  absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<v1::Worker::Stub>> stubs_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace shardmap

#endif  // SHARDMAP_SERVER_WORKER_CALLS_H_
