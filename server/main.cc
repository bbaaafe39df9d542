// shardmap-coordinator: the worker pool, planner and job runner behind the
// Coordinator and WorkerRegistry services. Serves until SIGINT or SIGTERM.
#include <grpcpp/grpcpp.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <iostream>

#include "ops/logging.h"
#include "ops/metrics_endpoint.h"
#include "ops/process_tuning.h"
#include "ops/server_ops.h"
#include "ops/signals.h"
#include "rpc/channel.h"
#include "rpc/credentials.h"
#include "rpc/drain_gate.h"
#include "rpc/health_port.h"
#include "server/array_service.h"
#include "server/call_registry.h"
#include "server/coordinator_health.h"
#include "server/coordinator_metrics.h"
#include "server/coordinator_service.h"
#include "server/deadline_watchdog.h"
#include "server/grpc_worker_connector.h"
#include "server/job_runner.h"
#include "server/job_service.h"
#include "server/name_locks.h"
#include "server/resident_index.h"
#include "server/worker_calls.h"
#include "server/worker_pool.h"

int main(int argc, char** argv) {
  shardmap::TuneProcess();
  using namespace shardmap;
  CLI::App app{"shardmap-coordinator: splits jobs across registered workers"};
  std::string listen = "127.0.0.1:7070";
  double heartbeat_timeout = 3.0;
  double max_job_seconds = 600;
  double collective_timeout = 30;
  ServerOpsFlags ops;
  AddServerOpsFlags(app, ops);
  app.add_option("--listen", listen,
                 "HOST:PORT to serve on; port 0 = any free port")
      ->capture_default_str();
  app.add_option(
         "--heartbeat-timeout", heartbeat_timeout,
         "seconds without a heartbeat after which a worker leaves the pool")
      ->capture_default_str();
  app.add_option("--max-job-seconds", max_job_seconds,
                 "deadline of a job whose client set none (or a later one)")
      ->capture_default_str();
  app.add_option("--collective-timeout", collective_timeout,
                 "seconds a collective may wait for one peer message before "
                 "its job fails with DEADLINE_EXCEEDED")
      ->capture_default_str();
  uint64_t max_job_bytes = uint64_t{16} << 30;
  int max_concurrent_jobs = 64;
  app.add_option("--max-job-bytes", max_job_bytes,
                 "largest job: its argument bytes plus the bytes of the "
                 "outputs it returns, checked before they are allocated")
      ->capture_default_str();
  app.add_option("--max-concurrent-jobs", max_concurrent_jobs,
                 "jobs running at once; more are refused with "
                 "RESOURCE_EXHAUSTED (0: no limit)")
      ->capture_default_str();
  int64_t expect_workers = 0;
  double init_timeout = 30;
  app.add_option("--expect-workers", expect_workers,
                 "health is NOT_SERVING until this many workers (ranks "
                 "0..N-1 when ranked) are live; 0 = no expectation")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--init-timeout", init_timeout,
                 "seconds after start that jobs wait for the expected "
                 "workers before failing with UNAVAILABLE")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  double call_memory = 600;
  uint64_t call_memory_bytes = uint64_t{256} << 20;
  app.add_option("--call-memory", call_memory,
                 "seconds the outcome of a call with a call_id is kept, so a "
                 "retry with that call_id gets it instead of running again")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--call-memory-bytes", call_memory_bytes,
                 "returned outputs kept for such retries, newest first; a "
                 "retry whose outputs were dropped gets ALREADY_EXISTS")
      ->capture_default_str();
  SecurityOptions security_options;
  AddSecurityFlags(app, security_options, /*server=*/true);
  app.set_version_flag("--version", SHARDMAP_VERSION);
  CLI11_PARSE(app, argc, argv);
  if (absl::Status s =
          SetupLogging("coordinator", ops.log_level, ops.log_format);
      !s.ok()) {
    std::cerr << "error: INVALID_ARGUMENT: " << s.message() << "\n";
    return 64;
  }
  auto security =
      Security::ForServer(security_options, {listen}, "shardmap-coordinator");
  if (!security.ok()) return ReportConfigError(security.status());
  BlockTerminationSignals();

  WorkerPool::Options pool_options;
  pool_options.heartbeat_timeout = absl::Seconds(heartbeat_timeout);
  pool_options.heartbeat_interval =
      std::min(absl::Milliseconds(500), pool_options.heartbeat_timeout / 4);
  WorkerPool pool(pool_options);
  GrpcWorkerConnector connector;
  DrainGate gate("the coordinator");
  JobRunner::Options runner_options;
  runner_options.check_live = [&pool, &gate](const WorkerPool::Worker& w) {
    if (gate.cancelled()) {
      return absl::UnavailableError(
          "the coordinator is shutting down and its --grace period ended "
          "before the job did");
    }
    return pool.CheckLive(w.id);
  };
  runner_options.collective_timeout = absl::Seconds(collective_timeout);
  runner_options.max_job_bytes = max_job_bytes;
  ResidentIndex index(
      [&pool](const std::string& id) { return pool.CheckLive(id).ok(); });
  NameLocks locks;
  WorkerCalls calls;
  JobRunner runner(runner_options, &connector, &index);
  DeadlineWatchdog watchdog;
  CoordinatorService::Options service_options;
  service_options.max_job_time = absl::Seconds(max_job_seconds);
  service_options.expected_workers = expect_workers;
  service_options.gate = &gate;
  JobService::Options job_options;
  job_options.max_job_bytes = max_job_bytes;
  job_options.max_concurrent_jobs = max_concurrent_jobs;
  CallRegistry::Options call_options;
  call_options.keep = absl::Seconds(call_memory);
  call_options.max_output_bytes = call_memory_bytes;
  CallRegistry call_registry(call_options);
  CoordinatorMetrics metrics([&pool](const std::string& function) {
    return pool.FindFunction(function).ok();
  });
  std::unique_ptr<MetricsEndpoint> metrics_endpoint;
  if (!ops.metrics.empty()) {
    auto started = MetricsEndpoint::Start(ops.metrics, metrics.registry(),
                                          security_options.insecure);
    if (!started.ok()) {
      if (absl::IsFailedPrecondition(started.status())) {
        return ReportConfigError(started.status());
      }
      std::cerr << "error: UNAVAILABLE: " << started.status().message() << "\n";
      return 69;
    }
    metrics_endpoint = *std::move(started);
    job_options.on_job_done = [&metrics](const std::string& function,
                                         absl::StatusCode code,
                                         absl::Duration elapsed) {
      metrics.JobDone(function, code, elapsed);
    };
  }
  CoordinatorHealth::Options health_options;
  health_options.expected_workers = expect_workers;
  health_options.init_timeout = absl::Seconds(init_timeout);
  health_options.on_poll = [&metrics](int64_t live) {
    metrics.SetWorkersUp(live);
  };
  CoordinatorHealth health(health_options, &pool);
  job_options.await_bring_up = [&health](absl::Time deadline) {
    return health.AwaitBringUp(deadline);
  };
  JobService jobs(job_options, &pool, &runner, &index, &locks, &call_registry);
  ArrayService arrays(&index, &locks, &pool, &calls, &call_registry);
  CoordinatorService coordinator(service_options, &jobs, &arrays, &pool,
                                 &watchdog);
  RegistryService registry(&pool, &index);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(listen, security->ServerCredentials("coordinator"),
                           &port);
  ConfigureServerBuilder(builder);
  builder.RegisterService(&coordinator);
  builder.RegisterService(&registry);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    std::cerr << "error: UNAVAILABLE: cannot listen on " << listen << "\n";
    return 69;
  }
  HealthFanout health_fanout(server->GetHealthCheckService());
  auto health_port =
      HealthPort::StartIfAsked(ops.health_listen, &health_fanout);
  if (!health_port.ok()) {
    std::cerr << "error: UNAVAILABLE: " << health_port.status().message()
              << "\n";
    return 69;
  }
  health_fanout.SetServingStatus(kLivenessService, true);
  health.Attach(&health_fanout);
  std::cout << "shardmap-coordinator listening on " << ReplacePort(listen, port)
            << std::endl;
  if (*health_port) {
    std::cout << "shardmap-coordinator health on " << (*health_port)->address()
              << std::endl;
  }
  if (metrics_endpoint) {
    std::cout << "shardmap-coordinator metrics on "
              << metrics_endpoint->address() << std::endl;
  }
  const int sig = WaitForTerminationSignal();
  // NOT_SERVING, refuse new jobs, let those in flight finish until the
  // grace deadline, cancel the rest; workers keep heartbeating meanwhile.
  health.Shutdown();
  DrainAfterSignal(sig, gate, ops.grace_seconds);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  health_port->reset();
  spdlog::info("stopped");
  return 0;
}
