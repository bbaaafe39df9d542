#include "tests/integration/test_cluster.h"

#include <thread>

#include "client/shard_client.h"
#include "rpc/channel.h"

namespace shardmap {

TestCluster::TestCluster(const Options& options) {
  WorkerPool::Options pool_options;
  pool_options.heartbeat_interval = absl::Milliseconds(50);
  pool_options.heartbeat_timeout = options.heartbeat_timeout;
  pool_ = std::make_unique<WorkerPool>(pool_options);
  JobRunner::Options runner_options;
  runner_options.check_live = [pool =
                                   pool_.get()](const WorkerPool::Worker& w) {
    return pool->CheckLive(w.id);
  };
  index_ = std::make_unique<ResidentIndex>(
      [pool = pool_.get()](const std::string& id) {
        return pool->CheckLive(id).ok();
      });
  runner_ =
      std::make_unique<JobRunner>(runner_options, &connector_, index_.get());
  jobs_ = std::make_unique<JobService>(JobService::Options{}, pool_.get(),
                                       runner_.get(), index_.get(), &locks_,
                                       /*calls=*/nullptr);
  arrays_ = std::make_unique<ArrayService>(index_.get(), &locks_, pool_.get(),
                                           &calls_, /*call_registry=*/nullptr);
  coordinator_ = std::make_unique<CoordinatorService>(
      CoordinatorService::Options{}, jobs_.get(), arrays_.get(), pool_.get(),
      &watchdog_);
  registry_ = std::make_unique<RegistryService>(pool_.get(), index_.get());
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                           &port);
  ConfigureServerBuilder(builder);
  builder.RegisterService(coordinator_.get());
  builder.RegisterService(registry_.get());
  server_ = builder.BuildAndStart();
  address_ = "127.0.0.1:" + std::to_string(port);

  for (int i = 0; i < options.num_workers; ++i) {
    auto w = std::make_unique<Worker>();
    RegisterBuiltins(w->registry);
    RegisterCollectiveBuiltins(w->registry);
    RegisterStateBuiltins(w->registry);
    w->executor = std::make_unique<ShardExecutor>(&w->registry);
    w->network = std::make_unique<PeerNetwork>(
        PeerNetwork::Options{"", static_cast<uint64_t>(i + 1)});
    w->peer_service = std::make_unique<PeerService>(w->network->inbox());
    w->sequencer = std::make_unique<JobSequencer>();
    w->service = std::make_unique<WorkerService>(
        WorkerService::Options{}, w->executor.get(), w->network.get(),
        w->sequencer.get(), &w->store);
    grpc::ServerBuilder wb;
    int wport = 0;
    wb.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                        &wport);
    ConfigureServerBuilder(wb);
    wb.RegisterService(w->service.get());
    wb.RegisterCallbackGenericService(w->peer_service.get());
    w->server = wb.BuildAndStart();
    w->address = "127.0.0.1:" + std::to_string(wport);
    w->network->set_my_address(w->address);
    CoordinatorLink::Options link;
    link.coordinator = address_;
    link.advertise = w->address;
    link.functions = w->registry.Signatures();
    link.incarnation = static_cast<uint64_t>(i + 1);  // the network's
    w->link = *CoordinatorLink::Create(link);
    workers_.push_back(std::move(w));
  }
  auto client = ShardClient::Create({address_});
  absl::Status s =
      (*client)->WaitForWorkers(options.num_workers, absl::Seconds(20));
  if (!s.ok()) std::abort();
}

void TestCluster::KillWorker(int i) {
  Worker& w = *workers_[i];
  w.link.reset();
  w.server->Shutdown(std::chrono::system_clock::now());
  w.network.reset();
}

TestCluster::~TestCluster() {
  for (auto& w : workers_) {
    w->link.reset();
    w->server->Shutdown(std::chrono::system_clock::now());
    w->network.reset();
  }
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
}

}  // namespace shardmap
