// shardmap-coordinator: the worker pool, planner and job runner behind the
// Coordinator and WorkerRegistry services. Serves until SIGINT or SIGTERM.
#include <grpcpp/grpcpp.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <iostream>

#include "core/channel.h"
#include "core/process_tuning.h"
#include "core/signals.h"
#include "server/coordinator_service.h"
#include "server/deadline_watchdog.h"
#include "server/grpc_worker_connector.h"
#include "server/job_runner.h"
#include "server/worker_pool.h"

int main(int argc, char** argv) {
  shardmap::TuneProcess();
  using namespace shardmap;
  CLI::App app{"shardmap-coordinator: splits jobs across registered workers"};
  std::string listen = "127.0.0.1:7070";
  double heartbeat_timeout = 3.0;
  double max_job_seconds = 600;
  double collective_timeout = 30;
  std::string log_level = "info";
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
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error")
      ->capture_default_str();
  app.set_version_flag("--version", SHARDMAP_VERSION);
  CLI11_PARSE(app, argc, argv);
  spdlog::set_default_logger(spdlog::stderr_color_mt("coordinator"));
  spdlog::set_level(spdlog::level::from_str(log_level));
  BlockTerminationSignals();

  WorkerPool::Options pool_options;
  pool_options.heartbeat_timeout = absl::Seconds(heartbeat_timeout);
  pool_options.heartbeat_interval =
      std::min(absl::Milliseconds(500), pool_options.heartbeat_timeout / 4);
  WorkerPool pool(pool_options);
  GrpcWorkerConnector connector;
  JobRunner::Options runner_options;
  runner_options.check_live = [&pool](const WorkerPool::Worker& w) {
    return pool.CheckLive(w.id);
  };
  runner_options.collective_timeout = absl::Seconds(collective_timeout);
  ResidentIndex index(
      [&pool](const std::string& id) { return pool.CheckLive(id).ok(); });
  NameLocks locks;
  WorkerCalls calls;
  JobRunner runner(runner_options, &connector, &index);
  DeadlineWatchdog watchdog;
  CoordinatorService::Options service_options;
  service_options.max_job_time = absl::Seconds(max_job_seconds);
  CoordinatorService coordinator(service_options, &pool, &runner, &watchdog,
                                 &index, &locks, &calls);
  RegistryService registry(&pool, &index);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &port);
  ConfigureServerBuilder(builder);
  builder.RegisterService(&coordinator);
  builder.RegisterService(&registry);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    std::cerr << "error: UNAVAILABLE: cannot listen on " << listen << "\n";
    return 69;
  }
  std::cout << "shardmap-coordinator listening on " << ReplacePort(listen, port)
            << std::endl;
  const int sig = WaitForTerminationSignal();
  spdlog::info("signal {}: shutting down", sig);
  // Stop accepting, let in-flight jobs finish until the grace deadline.
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  return 0;
}
