// The coordinator's view of its workers: who registered, at which address,
// and who is still heartbeating. A worker whose last heartbeat is older
// than `heartbeat_timeout` has left the pool. Also the catalog of function
// signatures the workers declared.
//
// Thread-safe.
#ifndef SHARDMAP_SERVER_WORKER_POOL_H_
#define SHARDMAP_SERVER_WORKER_POOL_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "shardmap/v1/common.pb.h"

namespace shardmap {

class WorkerPool {
 public:
  struct Options {
    // What the pool asks workers to keep to.
    absl::Duration heartbeat_interval = absl::Milliseconds(500);
    // A worker silent for this long is no longer live.
    absl::Duration heartbeat_timeout = absl::Seconds(3);
    // Injectable for tests.
    std::function<absl::Time()> clock = [] { return absl::Now(); };
    // Called with a worker's address when it leaves the pool (its
    // heartbeats stopped) or another process registers at its address
    // (e.g. to evict the channel to it). Runs under the pool's lock: it
    // must not call the pool.
    std::function<void(const std::string& address)> on_leave;
  };
  struct Worker {
    std::string id;
    std::string address;
    uint64_t incarnation = 0;
    absl::Time last_heartbeat;
    // The rank the worker claimed (--rank); mesh device i runs on rank i.
    std::optional<int64_t> rank;
    // Said so in a heartbeat (SIGTERM): live for the jobs it runs, but
    // never placed in a new one.
    bool draining = false;
    // The functions it registered, by name (server/function_availability.h).
    std::shared_ptr<const std::map<std::string, v1::FunctionSignature>>
        functions;
    // It takes a small job's argument chunks inside the ShardJob
    // (RegisterRequest.inline_chunks).
    bool inline_chunks = false;
  };

  explicit WorkerPool(Options options) : options_(std::move(options)) {}

  // Adds a worker and returns its id ("w0", "w1", ...). A worker that
  // registers again from the same address (a restart) replaces its old
  // entry, as does one claiming the rank of a worker that left the pool.
  // INVALID_ARGUMENT for an empty address or a negative rank;
  // ALREADY_EXISTS naming the rank and its holder when a live worker at
  // another address holds `rank`.
  absl::StatusOr<std::string> Register(
      const std::string& address, uint64_t incarnation,
      const std::vector<v1::FunctionSignature>& functions,
      std::optional<int64_t> rank = std::nullopt, bool inline_chunks = false);
  // NOT_FOUND if the worker is unknown, expired, or of an old incarnation.
  // `draining` marks it draining for good.
  absl::Status Heartbeat(const std::string& id, uint64_t incarnation,
                         bool draining = false);

  // Live workers in registration order.
  std::vector<Worker> LiveWorkers() const;
  // OK if worker `id` is still live; UNAVAILABLE saying how long it has
  // been silent otherwise.
  absl::Status CheckLive(const std::string& id) const;
  // The workers of devices 0..n-1: device i runs on the live worker of
  // rank i, and devices no rank claims on the unranked workers in
  // registration order. FAILED_PRECONDITION saying how many are alive (and
  // which ranks are missing) when that leaves a device without a worker.
  absl::StatusOr<std::vector<Worker>> Acquire(int64_t n) const;
  // OK when `expected` workers are live and, if any claimed a rank, ranks
  // 0..expected-1 are all among them; otherwise UNAVAILABLE like
  // "3/4 workers registered, missing rank 2".
  absl::Status CheckComplete(int64_t expected) const;

  // NOT_FOUND listing the known functions.
  absl::StatusOr<v1::FunctionSignature> FindFunction(
      const std::string& name) const;
  // The live workers' functions (FunctionsOfWorkers); while none is live,
  // those any worker registered.
  std::vector<v1::FunctionSignature> Functions() const;

  absl::Duration heartbeat_interval() const {
    return options_.heartbeat_interval;
  }

 private:
  void ExpireLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void LeftLocked(const Worker& w) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  mutable absl::Mutex mu_;
  // Keyed by registration sequence number, so iteration is in order.
  mutable std::map<uint64_t, Worker> workers_ ABSL_GUARDED_BY(mu_);
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, v1::FunctionSignature> functions_ ABSL_GUARDED_BY(mu_);
};

}  // namespace shardmap

#endif  // SHARDMAP_SERVER_WORKER_POOL_H_
