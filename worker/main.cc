// shardmap-worker: one mesh device. Registers with the coordinator, then
// serves the Worker service until SIGINT or SIGTERM.
#include <grpcpp/grpcpp.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <iostream>

#include "core/channel.h"
#include "core/signals.h"
#include "worker/coordinator_link.h"
#include "worker/function_registry.h"
#include "worker/shard_executor.h"
#include "worker/worker_service.h"

int main(int argc, char** argv) {
  using namespace shardmap;
  CLI::App app{"shardmap-worker: runs one mesh device's share of every job"};
  std::string coordinator;
  std::string listen = "127.0.0.1:0";
  std::string advertise;
  std::string log_level = "info";
  app.add_option("--coordinator", coordinator, "coordinator HOST:PORT")
      ->required();
  app.add_option("--listen", listen,
                 "address to serve on; port 0 = any free port")
      ->capture_default_str();
  app.add_option("--advertise", advertise,
                 "HOST:PORT others dial to reach this worker (default: the "
                 "listen host and the bound port)");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  spdlog::set_default_logger(spdlog::stderr_color_mt("worker"));
  spdlog::set_level(spdlog::level::from_str(log_level));
  BlockTerminationSignals();

  FunctionRegistry registry;
  RegisterBuiltins(registry);
  ShardExecutor executor(&registry);
  WorkerService service(WorkerService::Options{}, &executor);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &port);
  ConfigureServerBuilder(builder);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    std::cerr << "error: UNAVAILABLE: cannot listen on " << listen << "\n";
    return 69;
  }
  if (advertise.empty()) advertise = ReplacePort(listen, port);
  std::cout << "shardmap-worker listening on " << advertise << std::endl;

  CoordinatorLink::Options link_options;
  link_options.coordinator = coordinator;
  link_options.advertise = advertise;
  link_options.functions = registry.Signatures();
  auto link = CoordinatorLink::Create(link_options);
  if (!link.ok()) {
    std::cerr << "error: " << link.status().message() << "\n";
    return 64;
  }
  const int sig = WaitForTerminationSignal();
  spdlog::info("signal {}: shutting down", sig);
  link->reset();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  return 0;
}
