// gRPC glue for the coordinator: the client-facing Coordinator service and
// the WorkerRegistry service. Logic lives in JobService (jobs),
// ArrayService (whole resident arrays) and WorkerPool; this file only
// adapts the calls to them and converts statuses.
//
// Thread-safe.
#ifndef SHARDMAP_SERVER_COORDINATOR_SERVICE_H_
#define SHARDMAP_SERVER_COORDINATOR_SERVICE_H_

#include <cstdint>

#include "absl/time/time.h"
#include "core/device_threads.h"
#include "rpc/drain_gate.h"
#include "server/array_service.h"
#include "server/deadline_watchdog.h"
#include "server/function_catalog.h"
#include "server/job_admission.h"
#include "server/job_service.h"
#include "server/plan_service.h"
#include "server/resident_index.h"
#include "server/run_job_call.h"
#include "server/worker_pool.h"
#include "shardmap/v1/coordinator.grpc.pb.h"
#include "shardmap/v1/registry.grpc.pb.h"

namespace shardmap {

class CoordinatorService final : public v1::Coordinator::Service {
 public:
  struct Options {
    // A call whose client set no deadline, or a later one, gets this one.
    absl::Duration max_job_time = absl::Minutes(10);
    // --expect-workers: reported by GetClusterStatus.
    int64_t expected_workers = 0;
    // The SIGTERM drain; may be null. Not owned.
    DrainGate* gate = nullptr;
    // Functions and programs (null: the workers' functions only, and no
    // programs can be registered), and Plan (null: UNIMPLEMENTED). Not
    // owned.
    FunctionCatalog* catalog = nullptr;
    const PlanService* planner = nullptr;
    // RunJob's turns and the threads its jobs run on. Required; not owned.
    JobAdmission* admission = nullptr;
    DeviceThreads* job_threads = nullptr;
  };
  // None is owned.
  CoordinatorService(const Options& options, JobService* jobs,
                     ArrayService* arrays, WorkerPool* pool,
                     DeadlineWatchdog* watchdog);

  // RunJob is served on the callback API over byte buffers (its generated
  // handler is replaced; server/run_job_call.h), so that a job waiting for
  // its turn holds no thread and returned outputs go to the client without
  // a copy; on the wire it is the same RunJobRequest / RunJobResponse
  // stream.
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
  grpc::Status RegisterProgram(grpc::ServerContext* context,
                               const v1::RegisterProgramRequest* request,
                               v1::RegisterProgramResponse* response) override;
  grpc::Status UnregisterProgram(
      grpc::ServerContext* context, const v1::UnregisterProgramRequest* request,
      v1::UnregisterProgramResponse* response) override;
  grpc::Status Plan(grpc::ServerContext* context,
                    const v1::PlanRequest* request,
                    v1::PlanResponse* response) override;

 private:
  // A call's deadline: the client's, capped by max_job_time from `start`.
  absl::Time Deadline(const grpc::ServerContext& context,
                      absl::Time start) const;

  const Options options_;
  const RunJobCall::Services run_job_;
  JobService* const jobs_;            // Not owned.
  ArrayService* const arrays_;        // Not owned.
  WorkerPool* const pool_;            // Not owned.
  DeadlineWatchdog* const watchdog_;  // Not owned.
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
