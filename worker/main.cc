// shardmap-worker: one mesh device. Registers with the coordinator, then
// serves the Worker service until SIGINT or SIGTERM.
#include <grpcpp/grpcpp.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <random>

#include "core/status_util.h"
#include "ops/logging.h"
#include "ops/metrics_endpoint.h"
#include "ops/process_tuning.h"
#include "ops/server_ops.h"
#include "ops/signals.h"
#include "rpc/channel.h"
#include "rpc/credentials.h"
#include "rpc/drain_gate.h"
#include "rpc/health_port.h"
#include "worker/coordinator_link.h"
#include "worker/functions/function_registry.h"
#include "worker/job_sequencer.h"
#include "worker/metrics/worker_metrics.h"
#include "worker/rank.h"
#include "worker/shard_executor.h"
#include "worker/shm_network.h"
#include "worker/store/held_blocks.h"
#include "worker/store/resident_store.h"
#include "worker/transport/grpc/grpc_peer_transport.h"
#include "worker/transport/grpc/peer_service.h"
#include "worker/worker_service.h"

namespace {
constexpr char kWorkerServiceName[] = "shardmap.v1.Worker";

uint64_t NewIncarnation() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}
}  // namespace

int main(int argc, char** argv) {
  shardmap::TuneProcess();
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
  SecurityOptions security_options;
  AddSecurityFlags(app, security_options, /*server=*/true);
  CLI11_PARSE(app, argc, argv);
  BlockTerminationSignals();
  auto rank = ResolveRank(SystemRankSources(rank_flag, rank_from_hostname));
  absl::Status logging =
      rank.ok() ? SetupLogging("worker", ops.log_level, ops.log_format, *rank)
                : rank.status();
  if (!logging.ok()) {
    std::cerr << "error: INVALID_ARGUMENT: " << logging.message() << "\n";
    return 64;
  }
  auto security =
      Security::ForServer(security_options, {listen}, "shardmap-worker");
  if (!security.ok()) return ReportConfigError(security.status());

  FunctionRegistry registry;
  RegisterBuiltins(registry);
  RegisterCollectiveBuiltins(registry);
  RegisterStateBuiltins(registry);
  if (test_functions) RegisterTestBuiltins(registry);
  ShardExecutor executor(&registry);
  JobSequencer sequencer;

  // The peer network needs our advertised address, known only once the
  // port is bound; the Peer service and the Worker service share the
  // server, so it is built first and the network attached after.
  std::unique_ptr<PeerNetwork> network;

  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(listen, security->ServerCredentials("worker"),
                           &port);
  ConfigureServerBuilder(builder);
  PeerNetwork::Options network_options;
  network_options.incarnation = NewIncarnation();
  // Filled in below, before any job can arrive: the coordinator learns of
  // this worker only after registration, which happens after the bind.
  network = std::make_unique<PeerNetwork>(network_options);
  PeerService peer_service(network->inbox());
  if (const char* env = std::getenv("SHARDMAP_NO_SHM");
      env != nullptr && std::string(env) == "1") {
    no_shm = true;
  }
  ShmNetwork::Options shm_options;
  shm_options.enabled = !no_shm;
  shm_options.incarnation = network_options.incarnation;
  ShmNetwork shm(shm_options);
  ShmPeerService shm_service(&shm);
  WorkerService::Options service_options;
  service_options.collective_timeout = absl::Seconds(collective_timeout);
  DrainGate gate("the worker");
  service_options.gate = &gate;
  service_options.shm = &shm;
  ResidentStore store(state_dir);
  MemoryBudget budget(memory_budget, [&store] { return store.Bytes(); });
  service_options.budget = &budget;
  if (auto loaded = store.LoadDirectory(); !loaded.ok()) {
    std::cerr << "error: " << StatusCodeName(loaded.status().code()) << ": "
              << loaded.status().message() << "\n";
    return 65;
  } else if (*loaded > 0) {
    spdlog::info("kept {} resident blocks from {}", *loaded, state_dir);
  }
  std::unique_ptr<MetricsEndpoint> metrics_endpoint;
  if (!ops.metrics.empty()) {
    auto started =
        MetricsEndpoint::Start(ops.metrics, worker_metrics::Enable([&store] {
                                 // What --memory-budget counts: every version
                                 // held.
                                 return static_cast<int64_t>(store.Bytes());
                               }),
                               security_options.insecure);
    if (!started.ok()) {
      if (absl::IsFailedPrecondition(started.status())) {
        return ReportConfigError(started.status());
      }
      std::cerr << "error: UNAVAILABLE: " << started.status().message() << "\n";
      return 69;
    }
    metrics_endpoint = *std::move(started);
  }
  WorkerService service(service_options, &executor, network.get(), &sequencer,
                        &store);
  builder.RegisterService(&service);
  builder.RegisterCallbackGenericService(&peer_service);
  builder.RegisterService(&shm_service);
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
  grpc::HealthCheckServiceInterface* health = &health_fanout;
  health->SetServingStatus(kLivenessService, true);
  auto set_health = [health](bool serving) {
    health->SetServingStatus("", serving);
    health->SetServingStatus(kWorkerServiceName, serving);
  };
  set_health(false);  // SERVING once registered
  if (advertise.empty()) advertise = ReplacePort(listen, port);
  network->set_my_address(advertise);
  shm.set_my_address(advertise);
  std::cout << "shardmap-worker listening on " << advertise << std::endl;
  if (*health_port) {
    std::cout << "shardmap-worker health on " << (*health_port)->address()
              << std::endl;
  }
  if (metrics_endpoint) {
    std::cout << "shardmap-worker metrics on " << metrics_endpoint->address()
              << std::endl;
  }

  CoordinatorLink::Options link_options;
  link_options.coordinator = coordinator;
  link_options.advertise = advertise;
  link_options.functions = registry.Signatures();
  link_options.held_blocks = [&store] { return HeldBlocks(store); };
  link_options.drop_blocks = [&store](const std::vector<v1::HeldBlock>& d) {
    DropHeldBlocks(d, &store);
  };
  link_options.rank = *rank;
  link_options.on_registered = set_health;
  link_options.incarnation = network_options.incarnation;
  auto link = CoordinatorLink::Create(link_options);
  if (!link.ok()) {
    std::cerr << "error: " << link.status().message() << "\n";
    return 64;
  }
  const int sig = WaitForTerminationSignal();
  // NOT_SERVING and no new jobs; the jobs in flight finish (still
  // heartbeating, so the coordinator keeps counting on us) until the
  // grace deadline, then are cancelled.
  health->Shutdown();
  (*link)->SetDraining();
  DrainAfterSignal(sig, gate, ops.grace_seconds);
  link->reset();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  health_port->reset();
  network.reset();
  return 0;
}
