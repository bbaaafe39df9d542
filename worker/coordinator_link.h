// Keeps a worker registered with the coordinator: registers, heartbeats at
// the interval the coordinator asks for, and registers again when the
// coordinator no longer knows it (it expired or restarted).
//
//   UNREGISTERED --Register ok--> REGISTERED --Heartbeat NOT_FOUND--+
//        ^   |                        |                            |
//        |   +--fails: wait retry-----+--Heartbeat ok: wait interval
//        +---------------------------------------------------------+
//
// Thread-safe. Owns one background thread, stopped by the destructor.
#ifndef SHARDMAP_WORKER_COORDINATOR_LINK_H_
#define SHARDMAP_WORKER_COORDINATOR_LINK_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "shardmap/v1/registry.grpc.pb.h"

namespace shardmap {

class CoordinatorLink {
 public:
  struct Options {
    std::string coordinator;  // HOST:PORT
    std::string advertise;    // the address others dial to reach us
    std::vector<v1::FunctionSignature> functions;
    absl::Duration rpc_timeout = absl::Seconds(5);  // deadline of each RPC
    absl::Duration retry_interval = absl::Milliseconds(200);
    // Every resident block held, reported at each registration.
    std::function<std::vector<v1::HeldBlock>()> held_blocks;
    // Called with the reported blocks the coordinator says nobody can use
    // (RegisterResponse.drop), to free them.
    std::function<void(const std::vector<v1::HeldBlock>&)> drop_blocks;
    // This worker's rank, if it has one (worker/rank.h).
    std::optional<int64_t> rank;
    // Called with true when a registration succeeds and with false when
    // the coordinator forgets this worker (the worker's health).
    std::function<void(bool registered)> on_registered;
    // This process's start, as its peers know it (PeerFrame.incarnation);
    // 0: a random one. Jobs name each device's by it.
    uint64_t incarnation = 0;
  };

  // Starts the background thread; returns at once.
  static absl::StatusOr<std::unique_ptr<CoordinatorLink>> Create(
      const Options& options);
  ~CoordinatorLink();
  CoordinatorLink(const CoordinatorLink&) = delete;
  CoordinatorLink& operator=(const CoordinatorLink&) = delete;

  // Empty until the first registration succeeds.
  std::string worker_id() const;

  // Tells the coordinator at once, and in every later heartbeat, that this
  // worker is shutting down: it gets no new jobs.
  void SetDraining();

 private:
  explicit CoordinatorLink(const Options& options);
  void Loop();
  // Waits up to `d` or until kicked; true if Stop was requested.
  bool WaitForStop(absl::Duration d);

  const Options options_;
  const uint64_t incarnation_;
  std::unique_ptr<v1::WorkerRegistry::Stub> stub_;

  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  bool kick_ ABSL_GUARDED_BY(mu_) = false;  // heartbeat now
  std::string worker_id_ ABSL_GUARDED_BY(mu_);

  // Declared last so it is destroyed (joined) first.
  std::thread thread_;
};

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_COORDINATOR_LINK_H_
