// gRPC glue for the Worker service: receives one device's job (header, then
// argument chunks), runs it through the ShardExecutor, and streams back the
// output headers, digests and the chunks the coordinator asked for.
//
// Thread-safe: each RunShard call is independent.
#ifndef SHARDMAP_WORKER_WORKER_SERVICE_H_
#define SHARDMAP_WORKER_WORKER_SERVICE_H_

#include <cstdint>

#include "shardmap/v1/worker.grpc.pb.h"
#include "worker/shard_executor.h"

namespace shardmap {

class WorkerService final : public v1::Worker::Service {
 public:
  struct Options {
    // Largest total of argument bytes one job may bring to this worker.
    uint64_t max_job_bytes = uint64_t{16} << 30;
  };
  WorkerService(const Options& options, const ShardExecutor* executor)
      : options_(options), executor_(executor) {}

  grpc::Status RunShard(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<v1::ShardResponse, v1::ShardRequest>* stream)
      override;

 private:
  const Options options_;
  const ShardExecutor* const executor_;  // Not owned.
};

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_WORKER_SERVICE_H_
