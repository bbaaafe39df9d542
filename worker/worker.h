// The worker process's object graph: its functions and executor, resident
// store and memory budget, the peer network (gRPC and shared memory) on
// one ChannelCache, the Worker, Peer and ShmPeer services, health,
// metrics, and the link that keeps it registered with the coordinator;
// built and started by Create and torn down in order by Drain and the
// destructor. worker/main.cc and the integration tests' cluster both build
// workers through it.
//
// Thread-safe: Create and the destructor from one thread; Drain or Kill
// once.
#ifndef SHARDMAP_WORKER_WORKER_H_
#define SHARDMAP_WORKER_WORKER_H_

#include <grpcpp/security/server_credentials.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace shardmap {

class CoordinatorLink;
class ResidentStore;
class Serving;  // ops/serving.h

class Worker {
 public:
  struct Options {
    std::string coordinator;  // HOST:PORT; required
    std::string listen = "127.0.0.1:0";
    // What others dial; empty: the listen host and the bound port.
    std::string advertise;
    // Null: plaintext (main passes --tls-*'s, rpc/credentials.h).
    std::shared_ptr<grpc::ServerCredentials> credentials;
    std::string health_listen;  // --health-listen; empty: none
    std::string metrics;        // --metrics; empty: none
    bool insecure = false;      // --insecure: metrics may leave loopback
    absl::Duration collective_timeout = absl::Seconds(30);
    uint64_t memory_budget = 0;   // bytes; 0: no limit
    std::string state_dir;        // empty: resident blocks only in memory
    bool test_functions = false;  // also spin and fail_on
    // Plugin libraries to load at start (--plugin, $SHARDMAP_PLUGINS).
    std::vector<std::string> plugins;
    std::optional<int64_t> rank;   // resolved (worker/rank.h)
    bool shm = true;               // false: --no-shm
    bool shm_single_copy = false;  // --shm-single-copy
    // This process's start as peers know it; 0: a random one.
    uint64_t incarnation = 0;
    double grace_seconds = 30;  // --grace, for Drain
  };

  // Builds every object, loads --state-dir, starts serving and registering.
  // Errors carry the exit code of the binary (ops/serving.h): the state
  // directory's (kExitDataErr), a plugin's (kExitConfig), the metrics
  // endpoint's, UNAVAILABLE "cannot listen on ..." or the health port's, the
  // link's (kExitUsage).
  static absl::StatusOr<std::unique_ptr<Worker>> Create(const Options& options);
  // Kill unless Drain ran, then destroys the graph in order.
  ~Worker();

  // The advertised address, the health port's and the metrics endpoint's
  // ("" if none).
  const std::string& address() const { return address_; }
  // The address the gRPC port is bound to (differs from address() under
  // --advertise).
  std::string bound_address() const;
  std::string health_address() const;
  std::string metrics_address() const;
  ResidentStore& store();

  // The SIGTERM drain after signal `sig`: NOT_SERVING and no new jobs; the
  // jobs in flight finish (still heartbeating) until the --grace deadline,
  // then are cancelled; then registration and the server stop.
  void Drain(int sig);
  // Stops heartbeating, the server and the peer links at once (the process
  // "dies"); the store stays readable.
  void Kill();

 private:
  struct Jobs;      // functions, executor, store, budget (worker.cc)
  struct Network;   // channels, peer network, shared memory
  struct Services;  // the gRPC services, metrics
  explicit Worker(const Options& options);

  const Options options_;
  std::string address_;
  std::unique_ptr<Jobs> jobs_;
  std::unique_ptr<Network> network_;
  std::unique_ptr<Services> services_;
  std::unique_ptr<Serving> serving_;
  std::unique_ptr<CoordinatorLink> link_;
};

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_WORKER_H_
