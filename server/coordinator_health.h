// The coordinator's readiness: whether the workers it expects are live,
// published through grpc.health.v1 and used to hold jobs during bring-up.
//
// A background thread checks the pool every `poll` and sets the overall
// service ("") and shardmap.v1.Coordinator to SERVING exactly while the
// pool is complete (WorkerPool::CheckComplete: `expected_workers` live,
// ranks 0..n-1 when ranked; with 0 expected, always). So a worker that
// stops heartbeating turns health NOT_SERVING within heartbeat_timeout +
// poll, and Watch reports it. Shutdown turns everything NOT_SERVING for
// good (the SIGTERM drain).
//
// Thread-safe.
#ifndef SHARDMAP_SERVER_COORDINATOR_HEALTH_H_
#define SHARDMAP_SERVER_COORDINATOR_HEALTH_H_

#include <grpcpp/health_check_service_interface.h>

#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/worker_pool.h"

namespace shardmap {

class CoordinatorHealth {
 public:
  // The per-service name the coordinator reports besides "".
  static constexpr char kServiceName[] = "shardmap.v1.Coordinator";

  struct Options {
    int64_t expected_workers = 0;
    // How long after start jobs wait for the expected workers; after it,
    // a job on an incomplete cluster fails at once.
    absl::Duration init_timeout = absl::Seconds(30);
    absl::Duration poll = absl::Milliseconds(100);
    // Called after every poll with the number of live workers (metrics).
    std::function<void(int64_t live)> on_poll;
  };
  CoordinatorHealth(const Options& options, const WorkerPool* pool);
  ~CoordinatorHealth();
  CoordinatorHealth(const CoordinatorHealth&) = delete;
  CoordinatorHealth& operator=(const CoordinatorHealth&) = delete;

  // OK at once if the cluster was complete at least once since start (a
  // later loss is the job's own failure, reported by the pool). Otherwise
  // waits until it is, until `deadline` or the end of the init timeout,
  // whichever is first: UNAVAILABLE like "the cluster is not complete
  // after 30s: 3/4 workers registered, missing rank 2".
  absl::Status AwaitBringUp(absl::Time deadline) const;

  // Publishes to `health` (the server's) from now on; created before the
  // server so jobs that arrive early already find it.
  void Attach(grpc::HealthCheckServiceInterface* health);

  // NOT_SERVING from now on, whatever the pool does.
  void Shutdown();

 private:
  void Loop();
  void Publish(bool serving) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  const WorkerPool* const pool_;  // Not owned.
  const absl::Time init_deadline_;

  mutable absl::Mutex mu_;
  grpc::HealthCheckServiceInterface* health_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  bool serving_ ABSL_GUARDED_BY(mu_) = false;
  bool ever_complete_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status last_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;  // last: joined before the members go
};

}  // namespace shardmap

#endif  // SHARDMAP_SERVER_COORDINATOR_HEALTH_H_
