// An in-process cluster for integration tests: a coordinator and N workers,
// each a real gRPC server on 127.0.0.1 (port 0), joined exactly as the
// binaries join them (workers register through CoordinatorLink).
//
// Not thread-safe: create, use from many threads, destroy from one.
#ifndef SHARDMAP_TESTS_INTEGRATION_TEST_CLUSTER_H_
#define SHARDMAP_TESTS_INTEGRATION_TEST_CLUSTER_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "server/array_service.h"
#include "server/coordinator_service.h"
#include "server/deadline_watchdog.h"
#include "server/grpc_worker_connector.h"
#include "server/job_runner.h"
#include "server/job_service.h"
#include "server/name_locks.h"
#include "server/resident_index.h"
#include "server/worker_calls.h"
#include "server/worker_pool.h"
#include "worker/coordinator_link.h"
#include "worker/functions/function_registry.h"
#include "worker/job_sequencer.h"
#include "worker/shard_executor.h"
#include "worker/store/resident_store.h"
#include "worker/transport/grpc/grpc_peer_transport.h"
#include "worker/transport/grpc/peer_service.h"
#include "worker/worker_service.h"

namespace shardmap {

class TestCluster {
 public:
  struct Options {
    int num_workers = 4;
    absl::Duration heartbeat_timeout = absl::Seconds(10);
  };
  explicit TestCluster(const Options& options);
  ~TestCluster();

  const std::string& address() const { return address_; }
  // Stops worker `i`'s server at once (its process "dies").
  void KillWorker(int i);
  const std::string& worker_address(int i) const {
    return workers_[i]->address;
  }
  int num_workers() const { return static_cast<int>(workers_.size()); }
  // Worker `i`'s resident blocks, for tests that change what it holds
  // behind the coordinator's back.
  ResidentStore& worker_store(int i) { return workers_[i]->store; }

 private:
  struct Worker {
    FunctionRegistry registry;
    std::unique_ptr<ShardExecutor> executor;
    std::unique_ptr<PeerNetwork> network;
    std::unique_ptr<PeerService> peer_service;
    std::unique_ptr<JobSequencer> sequencer;
    ResidentStore store;
    std::unique_ptr<WorkerService> service;
    std::unique_ptr<grpc::Server> server;
    std::unique_ptr<CoordinatorLink> link;
    std::string address;
  };

  DeadlineWatchdog watchdog_;
  std::unique_ptr<WorkerPool> pool_;
  std::unique_ptr<ResidentIndex> index_;
  NameLocks locks_;
  WorkerCalls calls_;
  GrpcWorkerConnector connector_;
  std::unique_ptr<JobRunner> runner_;
  std::unique_ptr<JobService> jobs_;
  std::unique_ptr<ArrayService> arrays_;
  std::unique_ptr<CoordinatorService> coordinator_;
  std::unique_ptr<RegistryService> registry_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  std::vector<std::unique_ptr<Worker>> workers_;
};

}  // namespace shardmap

#endif  // SHARDMAP_TESTS_INTEGRATION_TEST_CLUSTER_H_
