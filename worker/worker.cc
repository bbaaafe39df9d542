#include "worker/worker.h"

#include <spdlog/spdlog.h>

#include <random>

#include "ops/server_ops.h"
#include "ops/serving.h"
#include "rpc/channel_cache.h"
#include "rpc/credentials.h"
#include "rpc/drain_gate.h"
#include "worker/coordinator_link.h"
#include "worker/functions/function_registry.h"
#include "worker/job_sequencer.h"
#include "worker/memory_budget.h"
#include "worker/metrics/worker_metrics.h"
#include "worker/plugin_loader.h"
#include "worker/shard_executor.h"
#include "worker/shm_network.h"
#include "worker/store/held_blocks.h"
#include "worker/store/resident_store.h"
#include "worker/transport/grpc/grpc_peer_transport.h"
#include "worker/transport/grpc/peer_service.h"
#include "worker/worker_service.h"

namespace shardmap {
namespace {

constexpr char kWorkerServiceName[] = "shardmap.v1.Worker";

uint64_t NewIncarnation() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

}  // namespace

// What runs jobs. Declared in the order they are built; destroyed in
// reverse.
struct Worker::Jobs {
  explicit Jobs(const Options& options)
      : executor(&registry),
        store(options.state_dir),
        budget(options.memory_budget, [this] { return store.Bytes(); }) {
    RegisterBuiltins(registry);
    RegisterCollectiveBuiltins(registry);
    RegisterStateBuiltins(registry);
    if (options.test_functions) RegisterTestBuiltins(registry);
  }

  FunctionRegistry registry;
  ShardExecutor executor;
  JobSequencer sequencer;
  DrainGate gate{"the worker"};
  ResidentStore store;
  MemoryBudget budget;
};

namespace {

ShmNetwork::Options ShmOptions(const Worker::Options& options,
                               uint64_t incarnation) {
  ShmNetwork::Options o;
  o.enabled = options.shm;
  o.incarnation = incarnation;
  o.single_copy = options.shm_single_copy;
  return o;
}

}  // namespace

// How the worker reaches its peers and they reach it.
struct Worker::Network {
  Network(const Options& options, uint64_t incarnation)
      : peers(std::make_unique<PeerNetwork>(
            PeerNetwork::Options{"", incarnation}, &channels)),
        peer_service(peers->inbox()),
        shm(ShmOptions(options, incarnation), &channels),
        shm_service(&shm) {}

  ChannelCache channels;
  // Reset by Kill, once the server no longer runs calls: its links to the
  // peers close, as a dead process's would.
  std::unique_ptr<PeerNetwork> peers;
  PeerService peer_service;
  ShmNetwork shm;
  ShmPeerService shm_service;
};

struct Worker::Services {
  Services(const Options& options, Jobs* jobs, Network* network)
      : worker(ServiceOptions(options, jobs, network), &jobs->executor,
               network->peers.get(), &jobs->sequencer, &jobs->store) {}

  static WorkerService::Options ServiceOptions(const Options& options,
                                               Jobs* jobs, Network* network) {
    WorkerService::Options service;
    service.collective_timeout = options.collective_timeout;
    service.gate = &jobs->gate;
    service.shm = &network->shm;
    service.budget = &jobs->budget;
    service.channels = &network->channels;
    return service;
  }

  std::unique_ptr<MetricsEndpoint> metrics_endpoint;
  WorkerService worker;
};

Worker::Worker(const Options& options) : options_(options) {}

absl::StatusOr<std::unique_ptr<Worker>> Worker::Create(const Options& options) {
  std::unique_ptr<Worker> w(new Worker(options));
  const uint64_t incarnation =
      options.incarnation != 0 ? options.incarnation : NewIncarnation();
  w->jobs_ = std::make_unique<Jobs>(options);
  if (absl::Status s = LoadPlugins(options.plugins, w->jobs_->registry);
      !s.ok()) {
    return WithExitCode(s, kExitConfig);
  }
  ResidentStore& store = w->jobs_->store;
  if (auto loaded = store.LoadDirectory(); !loaded.ok()) {
    return WithExitCode(loaded.status(), kExitDataErr);
  } else if (*loaded > 0) {
    spdlog::info("kept {} resident blocks from {}", *loaded, options.state_dir);
  }
  w->network_ = std::make_unique<Network>(options, incarnation);
  w->services_ =
      std::make_unique<Services>(options, w->jobs_.get(), w->network_.get());
  if (!options.metrics.empty()) {
    // What --memory-budget counts: every version held.
    auto metrics =
        StartMetricsIfAsked(options.metrics, worker_metrics::Enable([&store] {
                              return static_cast<int64_t>(store.Bytes());
                            }),
                            options.insecure);
    if (!metrics.ok()) return metrics.status();
    w->services_->metrics_endpoint = *std::move(metrics);
  }

  Serving::Options serving;
  serving.listen = options.listen;
  serving.credentials = options.credentials;
  serving.health_listen = options.health_listen;
  Services* services = w->services_.get();
  Network* network = w->network_.get();
  serving.register_services = [services, network](grpc::ServerBuilder& b) {
    b.RegisterService(&services->worker);
    b.RegisterCallbackGenericService(&network->peer_service);
    b.RegisterService(&network->shm_service);
  };
  auto started = Serving::Start(serving);
  if (!started.ok()) return started.status();
  w->serving_ = *std::move(started);
  HealthFanout* health = w->serving_->health();
  auto set_health = [health](bool serving) {
    health->SetServingStatus("", serving);
    health->SetServingStatus(kWorkerServiceName, serving);
  };
  set_health(false);  // SERVING once registered
  // The peers learn our address only now that the port is bound; no job
  // can arrive before registration, below.
  w->address_ =
      options.advertise.empty() ? w->serving_->address() : options.advertise;
  network->peers->set_my_address(w->address_);
  network->shm.set_my_address(w->address_);

  CoordinatorLink::Options link;
  link.coordinator = options.coordinator;
  link.advertise = w->address_;
  link.functions = w->jobs_->registry.Signatures();
  link.held_blocks = [&store] { return HeldBlocks(store); };
  link.drop_blocks = [&store](const std::vector<v1::HeldBlock>& d) {
    DropHeldBlocks(d, &store);
  };
  link.rank = options.rank;
  link.on_registered = set_health;
  link.incarnation = incarnation;
  auto created = CoordinatorLink::Create(link);
  if (!created.ok()) return WithExitCode(created.status(), kExitUsage);
  w->link_ = *std::move(created);
  return w;
}

Worker::~Worker() {
  Kill();
  serving_.reset();
  services_.reset();
  network_.reset();
  jobs_.reset();
}

std::string Worker::bound_address() const { return serving_->address(); }

std::string Worker::health_address() const {
  return serving_ ? serving_->health_address() : std::string();
}

std::string Worker::metrics_address() const {
  const auto& endpoint = services_->metrics_endpoint;
  return endpoint ? endpoint->address() : std::string();
}

ResidentStore& Worker::store() { return jobs_->store; }

void Worker::Drain(int sig) {
  // NOT_SERVING and no new jobs; the jobs in flight finish (still
  // heartbeating, so the coordinator keeps counting on us) until the
  // grace deadline, then are cancelled.
  serving_->health()->Shutdown();
  link_->SetDraining();
  DrainAfterSignal(sig, jobs_->gate, options_.grace_seconds);
  link_.reset();
  serving_->Shutdown(absl::Now() + absl::Seconds(1));
  network_->peers.reset();
}

void Worker::Kill() {
  link_.reset();
  if (serving_) serving_->Shutdown(absl::Now());
  if (network_) network_->peers.reset();
}

}  // namespace shardmap
