#include "tests/integration/test_cluster.h"

#include <cstdlib>
#include <iostream>

#include "client/shard_client.h"

namespace shardmap {
namespace {

template <typename T>
std::unique_ptr<T> OrAbort(absl::StatusOr<std::unique_ptr<T>> made) {
  if (!made.ok()) {
    std::cerr << "test cluster: " << made.status() << std::endl;
    std::abort();
  }
  return *std::move(made);
}

}  // namespace

TestCluster::TestCluster(const Options& options) {
  Coordinator::Options coordinator;
  coordinator.listen = "127.0.0.1:0";
  coordinator.heartbeat_timeout = options.heartbeat_timeout;
  coordinator.heartbeat_interval = absl::Milliseconds(50);
  coordinator.max_concurrent_jobs = options.max_concurrent_jobs;
  coordinator.max_queued_jobs = options.max_queued_jobs;
  coordinator.max_job_time = options.max_job_time;
  coordinator_ = OrAbort(Coordinator::Create(coordinator));
  for (int i = 0; i < options.num_workers; ++i) {
    Worker::Options worker;
    worker.coordinator = coordinator_->address();
    worker.incarnation = static_cast<uint64_t>(i + 1);
    workers_.push_back(OrAbort(Worker::Create(worker)));
  }
  auto client = OrAbort(ShardClient::Create({address()}));
  absl::Status s =
      client->WaitForWorkers(options.num_workers, absl::Seconds(20));
  if (!s.ok()) {
    std::cerr << "test cluster: " << s << std::endl;
    std::abort();
  }
}

TestCluster::~TestCluster() {
  workers_.clear();
  coordinator_.reset();
}

}  // namespace shardmap
