// shardmap-worker: one mesh device. Registers with the coordinator, then
// serves the Worker service until SIGINT or SIGTERM.
#include <CLI/CLI.hpp>
#include <cstdlib>
#include <iostream>

#include "ops/logging.h"
#include "ops/process_tuning.h"
#include "ops/server_ops.h"
#include "ops/serving.h"
#include "ops/signals.h"
#include "rpc/callback_pool.h"
#include "rpc/credentials.h"
#include "worker/plugin_loader.h"
#include "worker/rank.h"
#include "worker/worker.h"

int main(int argc, char** argv) {
  shardmap::TuneProcess();
  shardmap::KeepCallbackPool();  // rpc/callback_pool.h: safe shutdowns
  using namespace shardmap;
  CLI::App app{"shardmap-worker: runs one mesh device's share of every job"};
  std::string coordinator;
  std::string listen = "127.0.0.1:0";
  std::string advertise;
  ServerOpsFlags ops;
  AddServerOpsFlags(app, ops);
  app.add_option("--coordinator", coordinator, "coordinator HOST:PORT")
      ->required();
  app.add_option("--listen", listen,
                 "address to serve on; port 0 = any free port")
      ->capture_default_str();
  app.add_option("--advertise", advertise,
                 "HOST:PORT others dial to reach this worker (default: the "
                 "listen host and the bound port)");
  double collective_timeout = 30;
  uint64_t memory_budget = 0;
  app.add_option("--memory-budget", memory_budget,
                 "bytes of resident arrays plus job buffers this worker may "
                 "hold; jobs over it get RESOURCE_EXHAUSTED before "
                 "allocating (0: no limit)")
      ->capture_default_str();
  std::string state_dir;
  app.add_option("--state-dir", state_dir,
                 "keep resident blocks in this directory, and rejoin with them "
                 "after a restart");
  app.add_option("--collective-timeout", collective_timeout,
                 "seconds a collective waits for one peer message before the "
                 "job fails with DEADLINE_EXCEEDED")
      ->capture_default_str();
  bool test_functions = false;
  app.add_flag("--test-functions", test_functions,
               "also register spin and fail_on (psum with an injected fault), "
               "for fault tests");
  std::vector<std::string> plugins;
  app.add_option("--plugin", plugins,
                 "load this plugin library (built against the SDK, "
                 "docs/PLUGINS.md) at start; repeatable; also "
                 "$SHARDMAP_PLUGINS, paths separated by ':'");
  std::optional<int64_t> rank_flag;
  bool rank_from_hostname = false;
  app.add_option("--rank", rank_flag,
                 "this worker's rank: mesh device i runs on rank i (default: "
                 "$SHARDMAP_RANK, $JOB_COMPLETION_INDEX, $LWS_WORKER_INDEX, "
                 "else registration order)");
  app.add_flag("--rank-from-hostname", rank_from_hostname,
               "take the rank from the trailing -<n> of the host name "
               "(StatefulSet ordinals, Indexed Job pods)");
  bool no_shm = false;
  app.add_flag("--no-shm", no_shm,
               "exchange collective data with workers on this host over gRPC "
               "too, not shared memory (also env SHARDMAP_NO_SHM=1)");
  bool shm_single_copy = false;
  app.add_flag("--shm-single-copy", shm_single_copy,
               "let workers on this host that also have it read large "
               "blocks straight from this process's memory "
               "(process_vm_readv: one copy instead of two through the "
               "ring; faster where the kernel pins pages cheaply, e.g. "
               "bare metal; also env SHARDMAP_SHM_SINGLE_COPY=1)");
  SecurityOptions security_options;
  AddSecurityFlags(app, security_options, /*server=*/true);
  app.set_version_flag("--version", SHARDMAP_VERSION);
  CLI11_PARSE(app, argc, argv);
  BlockTerminationSignals();
  auto rank = ResolveRank(SystemRankSources(rank_flag, rank_from_hostname));
  absl::Status logging =
      rank.ok() ? SetupLogging("worker", ops.log_level, ops.log_format, *rank)
                : rank.status();
  if (!logging.ok()) {
    return ReportStartupError(WithExitCode(
        absl::InvalidArgumentError(logging.message()), kExitUsage));
  }
  auto security =
      Security::ForServer(security_options, {listen}, "shardmap-worker");
  if (!security.ok()) return ReportConfigError(security.status());

  if (const char* env = std::getenv("SHARDMAP_NO_SHM");
      env != nullptr && std::string(env) == "1") {
    no_shm = true;
  }
  if (const char* env = std::getenv("SHARDMAP_SHM_SINGLE_COPY");
      env != nullptr && std::string(env) == "1") {
    shm_single_copy = true;
  }
  Worker::Options options;
  options.coordinator = coordinator;
  options.listen = listen;
  options.advertise = advertise;
  options.credentials = security->ServerCredentials("worker");
  options.health_listen = ops.health_listen;
  options.metrics = ops.metrics;
  options.insecure = security_options.insecure;
  options.collective_timeout = absl::Seconds(collective_timeout);
  options.memory_budget = memory_budget;
  options.state_dir = state_dir;
  options.test_functions = test_functions;
  options.plugins = PluginPaths(plugins, std::getenv("SHARDMAP_PLUGINS"));
  options.rank = *rank;
  options.shm = !no_shm;
  options.shm_single_copy = shm_single_copy;
  options.grace_seconds = ops.grace_seconds;
  auto worker = Worker::Create(options);
  if (!worker.ok()) return ReportStartupError(worker.status());
  PrintServingLines(
      std::cout, "shardmap-worker",
      ListeningAddress(listen, (*worker)->bound_address()),
      ListeningAddress(ops.health_listen, (*worker)->health_address()),
      (*worker)->metrics_address());
  (*worker)->Drain(WaitForTerminationSignal());
  worker->reset();
  return kExitOk;
}
