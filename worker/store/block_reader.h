// Reads sub-boxes of resident blocks from other workers over their Worker
// service (ReadBlock), one cached channel per address. Thread-safe.
#ifndef SHARDMAP_WORKER_BLOCK_READER_H_
#define SHARDMAP_WORKER_BLOCK_READER_H_

#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "shardmap/v1/worker.grpc.pb.h"

namespace shardmap {

class BlockReader {
 public:
  absl::StatusOr<std::string> Read(const std::string& address,
                                   const v1::ReadBlockRequest& request,
                                   absl::Time deadline);

 private:
  absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<v1::Worker::Stub>> stubs_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_BLOCK_READER_H_
