// gRPC glue for the coordinator: the client-facing Coordinator service and
// the WorkerRegistry service. Logic lives in WorkerPool, PlanJob and
// JobRunner; this file only moves messages and converts statuses.
//
// Thread-safe.
#ifndef SHARDMAP_SERVER_COORDINATOR_SERVICE_H_
#define SHARDMAP_SERVER_COORDINATOR_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <functional>

#include "absl/time/time.h"
#include "rpc/drain_gate.h"
#include "server/call_registry.h"
#include "server/deadline_watchdog.h"
#include "server/job_runner.h"
#include "server/name_locks.h"
#include "server/resident_index.h"
#include "server/worker_calls.h"
#include "server/worker_pool.h"
#include "shardmap/v1/coordinator.grpc.pb.h"
#include "shardmap/v1/registry.grpc.pb.h"

namespace shardmap {

class CoordinatorService final : public v1::Coordinator::Service {
 public:
  struct Options {
    // A job whose client set no deadline, or a later one, gets this one.
    absl::Duration max_job_time = absl::Minutes(10);
    // Largest total of argument bytes one job may bring (--max-job-bytes;
    // the job runner adds the returned outputs to it).
    uint64_t max_job_bytes = uint64_t{16} << 30;
    // Jobs running at once; one more is RESOURCE_EXHAUSTED (0: no limit).
    int max_concurrent_jobs = 64;
    // --expect-workers: reported by GetClusterStatus.
    int64_t expected_workers = 0;
    // When set, every job first calls it with its deadline and fails with
    // its error: holds jobs while the cluster comes up
    // (CoordinatorHealth::AwaitBringUp).
    std::function<absl::Status(absl::Time deadline)> await_bring_up;
    // Called once per RunJob as it ends (metrics); `function` is empty if
    // the stream never named one.
    std::function<void(const std::string& function, absl::StatusCode code,
                       absl::Duration elapsed)>
        on_job_done;
    // The SIGTERM drain; may be null. Not owned.
    DrainGate* gate = nullptr;
    // Idempotency keys (call_id) of state-changing calls; null: call_ids
    // are ignored. Not owned.
    CallRegistry* call_registry = nullptr;
  };
  CoordinatorService(const Options& options, WorkerPool* pool,
                     JobRunner* runner, DeadlineWatchdog* watchdog,
                     ResidentIndex* index, NameLocks* locks, WorkerCalls* calls)
      : options_(options),
        pool_(pool),
        runner_(runner),
        watchdog_(watchdog),
        index_(index),
        locks_(locks),
        calls_(calls) {}

  grpc::Status RunJob(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<v1::RunJobResponse, v1::RunJobRequest>* stream)
      override;
  grpc::Status ListFunctions(grpc::ServerContext* context,
                             const v1::ListFunctionsRequest* request,
                             v1::ListFunctionsResponse* response) override;
  grpc::Status GetClusterStatus(grpc::ServerContext* context,
                                const v1::ClusterStatusRequest* request,
                                v1::ClusterStatusResponse* response) override;
  grpc::Status ListArrays(grpc::ServerContext* context,
                          const v1::ListArraysRequest* request,
                          v1::ListArraysResponse* response) override;
  grpc::Status DeleteArray(grpc::ServerContext* context,
                           const v1::DeleteArrayRequest* request,
                           v1::DeleteArrayResponse* response) override;
  grpc::Status SaveCheckpoint(grpc::ServerContext* context,
                              const v1::CheckpointRequest* request,
                              v1::CheckpointResponse* response) override;
  grpc::Status RestoreCheckpoint(grpc::ServerContext* context,
                                 const v1::CheckpointRequest* request,
                                 v1::CheckpointResponse* response) override;

 private:
  // A call's deadline: the client's, capped by max_job_time from `start`.
  absl::Time Deadline(const grpc::ServerContext& context,
                      absl::Time start) const;

  const Options options_;
  WorkerPool* const pool_;            // Not owned.
  JobRunner* const runner_;           // Not owned.
  DeadlineWatchdog* const watchdog_;  // Not owned.
  ResidentIndex* const index_;        // Not owned.
  NameLocks* const locks_;            // Not owned.
  WorkerCalls* const calls_;          // Not owned.
  std::atomic<int64_t> next_job_{0};
  std::atomic<int> running_{0};  // RunJob calls in progress
  std::atomic<int64_t> completed_{0};
  std::atomic<int64_t> failed_{0};
};

// Worker registration and heartbeats; quick and non-blocking, so it uses
// the callback API.
class RegistryService final : public v1::WorkerRegistry::CallbackService {
 public:
  // `index` may be null (no resident arrays to give back).
  RegistryService(WorkerPool* pool, ResidentIndex* index)
      : pool_(pool), index_(index) {}
  grpc::ServerUnaryReactor* Register(grpc::CallbackServerContext* context,
                                     const v1::RegisterRequest* request,
                                     v1::RegisterResponse* response) override;
  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* context,
                                      const v1::HeartbeatRequest* request,
                                      v1::HeartbeatResponse* response) override;

 private:
  WorkerPool* const pool_;      // Not owned.
  ResidentIndex* const index_;  // Not owned.
};

}  // namespace shardmap

#endif  // SHARDMAP_SERVER_COORDINATOR_SERVICE_H_
