// An in-process cluster for integration tests: a coordinator and N workers,
// each built by the binaries' own factories (Coordinator::Create,
// Worker::Create) on 127.0.0.1 (port 0), so the tests run the production
// object graph; workers register through their CoordinatorLink.
//
// Not thread-safe: create, use from many threads, destroy from one.
#ifndef SHARDMAP_TESTS_INTEGRATION_TEST_CLUSTER_H_
#define SHARDMAP_TESTS_INTEGRATION_TEST_CLUSTER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "server/coordinator.h"
#include "worker/store/resident_store.h"
#include "worker/worker.h"

namespace shardmap {

class TestCluster {
 public:
  struct Options {
    int num_workers = 4;
    absl::Duration heartbeat_timeout = absl::Seconds(10);
    // The coordinator's --max-concurrent-jobs and --max-queued-jobs.
    int max_concurrent_jobs = 64;
    int max_queued_jobs = 1024;
    // The coordinator's --max-job-seconds.
    absl::Duration max_job_time = absl::Minutes(10);
  };
  // Aborts if a process cannot start or the workers do not register.
  explicit TestCluster(const Options& options);
  ~TestCluster();

  const std::string& address() const { return coordinator_->address(); }
  // The coordinator's SIGTERM drain (Coordinator::Drain): returns once the
  // jobs running have finished and the server stopped.
  void DrainCoordinator() { coordinator_->Drain(15); }
  // Stops worker `i` at once (its process "dies").
  void KillWorker(int i) { workers_[i]->Kill(); }
  const std::string& worker_address(int i) const {
    return workers_[i]->address();
  }
  int num_workers() const { return static_cast<int>(workers_.size()); }
  // Worker `i`'s resident blocks, for tests that change what it holds
  // behind the coordinator's back.
  ResidentStore& worker_store(int i) { return workers_[i]->store(); }

 private:
  std::unique_ptr<Coordinator> coordinator_;
  std::vector<std::unique_ptr<Worker>> workers_;
};

}  // namespace shardmap

#endif  // SHARDMAP_TESTS_INTEGRATION_TEST_CLUSTER_H_
