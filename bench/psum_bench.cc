// psum_bench: times Communicator::Psum between N workers in one process,
// each a real gRPC server on 127.0.0.1 with its own peer network, so the
// bytes cross the same streams as between worker processes. Every
// iteration starts together (a barrier) and its time is the slowest rank's.
//
//   psum_bench --workers 4 --bytes 67108864 --iters 5
#include <grpcpp/grpcpp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <thread>

#include "absl/synchronization/barrier.h"
#include "absl/time/clock.h"
#include "ops/process_tuning.h"
#include "rpc/channel.h"
#include "rpc/channel_cache.h"
#include "worker/collectives/communicator.h"
#include "worker/transport/grpc/grpc_peer_transport.h"
#include "worker/transport/grpc/peer_service.h"

int main(int argc, char** argv) {
  shardmap::TuneProcess();
  using namespace shardmap;
  CLI::App app{"psum_bench: psum between in-process workers over gRPC"};
  int workers = 4;
  int64_t bytes = 4;
  int iters = 20;
  int warmup = 2;
  app.add_option("--workers", workers)->capture_default_str();
  app.add_option("--bytes", bytes, "float32 bytes per rank")
      ->capture_default_str();
  app.add_option("--iters", iters)->capture_default_str();
  app.add_option("--warmup", warmup)->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  struct Node {
    ChannelCache channels;
    std::unique_ptr<PeerNetwork> network;
    std::unique_ptr<PeerService> service;
    std::unique_ptr<grpc::Server> server;
  };
  std::vector<Node> nodes(workers);
  std::vector<std::string> addresses;
  for (int i = 0; i < workers; ++i) {
    nodes[i].network = std::make_unique<PeerNetwork>(
        PeerNetwork::Options{"", static_cast<uint64_t>(i + 1)},
        &nodes[i].channels);
    nodes[i].service = std::make_unique<PeerService>(nodes[i].network->inbox());
    grpc::ServerBuilder b;
    int port = 0;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    ConfigureServerBuilder(b);
    b.RegisterCallbackGenericService(nodes[i].service.get());
    nodes[i].server = b.BuildAndStart();
    addresses.push_back("127.0.0.1:" + std::to_string(port));
    nodes[i].network->set_my_address(addresses.back());
  }
  const Mesh mesh = *Mesh::Create({{"x", workers}});
  const int total = warmup + iters;
  std::vector<std::vector<double>> seconds(workers, std::vector<double>(total));
  std::vector<absl::Status> status(workers);
  absl::Barrier* barriers[2] = {nullptr, nullptr};
  std::vector<std::unique_ptr<absl::Barrier>> all;
  for (int i = 0; i < 2 * total; ++i) {
    all.push_back(std::make_unique<absl::Barrier>(workers));
  }
  (void)barriers;
  std::vector<std::thread> threads;
  for (int r = 0; r < workers; ++r) {
    threads.emplace_back([&, r] {
      GrpcPeerTransport::Options o;
      o.job_id = "bench";
      o.device = r;
      o.addresses = addresses;
      o.deadline = absl::Now() + absl::Minutes(10);
      GrpcPeerTransport transport(nodes[r].network.get(), o);
      Communicator comm(&mesh, r, &transport, {});
      Tensor x(DType::kFloat32, {std::max<int64_t>(1, bytes / 4)});
      for (int it = 0; it < total; ++it) {
        all[2 * it]->Block();
        const absl::Time t0 = absl::Now();
        auto y = comm.Psum(x, {"x"});
        seconds[r][it] = absl::ToDoubleSeconds(absl::Now() - t0);
        if (!y.ok()) status[r] = y.status();
        all[2 * it + 1]->Block();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < workers; ++r) {
    if (!status[r].ok()) {
      std::fprintf(stderr, "rank %d: %s\n", r, status[r].ToString().c_str());
      return 1;
    }
  }
  std::vector<double> slowest;
  for (int it = warmup; it < total; ++it) {
    double m = 0;
    for (int r = 0; r < workers; ++r) m = std::max(m, seconds[r][it]);
    slowest.push_back(m);
  }
  std::sort(slowest.begin(), slowest.end());
  const double median = slowest[slowest.size() / 2];
  const double algbw = bytes / median;
  const double busbw = algbw * 2.0 * (workers - 1) / workers;
  std::printf(
      "psum float32 workers=%d bytes=%lld: median %.1f us (min %.1f, max "
      "%.1f), algbw %.3f GB/s, busbw %.3f GB/s\n",
      workers, static_cast<long long>(bytes), median * 1e6,
      slowest.front() * 1e6, slowest.back() * 1e6, algbw / 1e9, busbw / 1e9);
  for (auto& n : nodes) n.server->Shutdown(std::chrono::system_clock::now());
  return 0;
}
