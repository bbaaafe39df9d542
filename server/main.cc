// shardmap-coordinator: the worker pool, planner and job runner behind the
// Coordinator and WorkerRegistry services. Serves until SIGINT or SIGTERM.
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <iostream>

#include "ops/logging.h"
#include "ops/process_tuning.h"
#include "ops/server_ops.h"
#include "ops/serving.h"
#include "ops/signals.h"
#include "rpc/callback_pool.h"
#include "rpc/credentials.h"
#include "server/coordinator.h"

int main(int argc, char** argv) {
  shardmap::TuneProcess();
  shardmap::KeepCallbackPool();  // rpc/callback_pool.h: safe shutdowns
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
  int max_queued_jobs = 1024;
  app.add_option("--max-job-bytes", max_job_bytes,
                 "largest job: its argument bytes plus the bytes of the "
                 "outputs it returns, checked before they are allocated")
      ->capture_default_str();
  app.add_option("--max-concurrent-jobs", max_concurrent_jobs,
                 "jobs running at once; more wait for a turn, in order of "
                 "arrival (0: no limit)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--max-queued-jobs", max_queued_jobs,
                 "jobs waiting for a turn; one more is refused with "
                 "RESOURCE_EXHAUSTED (0: refused whenever "
                 "--max-concurrent-jobs run)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
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
  std::string job_links = "auto";
  app.add_option("--job-links", job_links,
                 "when small jobs reach the workers over one long-lived "
                 "stream per worker instead of a stream per job: auto (when "
                 "the links are up or other jobs run), always, never")
      ->envname("SHARDMAP_JOB_LINKS")
      ->capture_default_str()
      ->check([](const std::string& value) {
        absl::StatusOr<JobLinks> parsed = ParseJobLinks(value);
        return parsed.ok() ? std::string()
                           : std::string(parsed.status().message());
      });
  std::string data_dir;
  app.add_option("--data-dir", data_dir,
                 "directory where registered expression programs are kept "
                 "(programs.json), so they survive a restart; without it "
                 "they live in memory only")
      ->check(CLI::ExistingDirectory);
  SecurityOptions security_options;
  AddSecurityFlags(app, security_options, /*server=*/true);
  app.set_version_flag("--version", SHARDMAP_VERSION);
  CLI11_PARSE(app, argc, argv);
  if (absl::Status s =
          SetupLogging("coordinator", ops.log_level, ops.log_format);
      !s.ok()) {
    return ReportStartupError(
        WithExitCode(absl::InvalidArgumentError(s.message()), kExitUsage));
  }
  auto security =
      Security::ForServer(security_options, {listen}, "shardmap-coordinator");
  if (!security.ok()) return ReportConfigError(security.status());
  BlockTerminationSignals();

  Coordinator::Options options;
  options.listen = listen;
  options.credentials = security->ServerCredentials("coordinator");
  options.health_listen = ops.health_listen;
  options.metrics = ops.metrics;
  options.insecure = security_options.insecure;
  options.heartbeat_timeout = absl::Seconds(heartbeat_timeout);
  options.max_job_time = absl::Seconds(max_job_seconds);
  options.collective_timeout = absl::Seconds(collective_timeout);
  options.max_job_bytes = max_job_bytes;
  options.max_concurrent_jobs = max_concurrent_jobs;
  options.max_queued_jobs = max_queued_jobs;
  options.expect_workers = expect_workers;
  options.init_timeout = absl::Seconds(init_timeout);
  options.call_memory = absl::Seconds(call_memory);
  options.call_memory_bytes = call_memory_bytes;
  options.grace_seconds = ops.grace_seconds;
  options.data_dir = data_dir;
  options.job_links = *ParseJobLinks(job_links);  // checked above
  auto coordinator = Coordinator::Create(options);
  if (!coordinator.ok()) return ReportStartupError(coordinator.status());
  PrintServingLines(
      std::cout, "shardmap-coordinator",
      ListeningAddress(listen, (*coordinator)->address()),
      ListeningAddress(ops.health_listen, (*coordinator)->health_address()),
      (*coordinator)->metrics_address());
  (*coordinator)->Drain(WaitForTerminationSignal());
  coordinator->reset();
  spdlog::info("stopped");
  return kExitOk;
}
