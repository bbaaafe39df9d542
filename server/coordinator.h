// The coordinator process's object graph: the worker pool, the channels to
// the workers, the job runner, resident arrays, health, metrics and the
// gRPC server that serves them, built and started by Create and torn down
// in order by Drain and the destructor. server/main.cc and the
// integration tests' cluster both build coordinators through it.
//
// Thread-safe: Create and the destructor from one thread; Drain once.
#ifndef SHARDMAP_SERVER_COORDINATOR_H_
#define SHARDMAP_SERVER_COORDINATOR_H_

#include <grpcpp/security/server_credentials.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/job_links.h"

namespace shardmap {

class Serving;  // ops/serving.h

class Coordinator {
 public:
  struct Options {
    std::string listen = "127.0.0.1:7070";  // port 0 = any free port
    // Null: plaintext (main passes --tls-*'s, rpc/credentials.h).
    std::shared_ptr<grpc::ServerCredentials> credentials;
    std::string health_listen;  // --health-listen; empty: none
    std::string metrics;        // --metrics; empty: none
    bool insecure = false;      // --insecure: metrics may leave loopback
    // A worker silent this long leaves the pool.
    absl::Duration heartbeat_timeout = absl::Seconds(3);
    // What workers are asked to heartbeat at; unset: a quarter of the
    // timeout, at most 500 ms.
    std::optional<absl::Duration> heartbeat_interval;
    absl::Duration max_job_time = absl::Seconds(600);
    absl::Duration collective_timeout = absl::Seconds(30);
    uint64_t max_job_bytes = uint64_t{16} << 30;
    int max_concurrent_jobs = 64;  // 0: no limit
    // Jobs that wait for a turn beyond those (--max-queued-jobs); one more
    // is refused. 0: none wait.
    int max_queued_jobs = 1024;
    int64_t expect_workers = 0;
    absl::Duration init_timeout = absl::Seconds(30);
    // Idempotency memory (--call-memory, --call-memory-bytes).
    absl::Duration call_memory = absl::Seconds(600);
    uint64_t call_memory_bytes = uint64_t{256} << 20;
    double grace_seconds = 30;  // --grace, for Drain
    // --data-dir: where registered programs are kept; empty: in memory.
    std::string data_dir;
    // --job-links (server/job_runner.h).
    JobLinks job_links = JobLinks::kAuto;
  };

  // Builds every object and starts serving. Errors carry the exit code of
  // the binary (ops/serving.h): DATA_LOSS for a damaged
  // <data-dir>/programs.json, the metrics endpoint's, UNAVAILABLE
  // "cannot listen on ..." or the health port's.
  static absl::StatusOr<std::unique_ptr<Coordinator>> Create(
      const Options& options);
  // Stops serving at once (if Drain did not) and destroys the graph in
  // order.
  ~Coordinator();

  // The bound address, the health port's and the metrics endpoint's ("" if
  // none).
  const std::string& address() const;
  std::string health_address() const;
  std::string metrics_address() const;

  // The SIGTERM drain after termination signal `sig`: NOT_SERVING, new jobs
  // and those waiting for a turn refused (UNAVAILABLE: they never
  // started), jobs running finish until the --grace deadline, the rest are
  // cancelled; then the server stops.
  void Drain(int sig);

 private:
  struct Workers;        // pool, channels, calls (coordinator.cc)
  struct Jobs;           // runner, resident arrays, locks, drain, programs
  struct Observability;  // metrics, health
  struct Services;       // the gRPC services
  explicit Coordinator(const Options& options);

  const Options options_;
  std::unique_ptr<Workers> workers_;
  std::unique_ptr<Jobs> jobs_;
  std::unique_ptr<Observability> observability_;
  std::unique_ptr<Services> services_;
  std::unique_ptr<Serving> serving_;
};

}  // namespace shardmap

#endif  // SHARDMAP_SERVER_COORDINATOR_H_
