#include "server/coordinator_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <memory>

#include "core/error_reason.h"
#include "core/status_util.h"
#include "rpc/grpc_status.h"
#include "rpc/raw_method.h"
#include "wire/proto_convert.h"

namespace shardmap {
namespace {

// The blocks a registering worker reports, with their arrays' layouts
// where it says them.
std::vector<ReportedBlock> ReportedBlocks(const v1::RegisterRequest& request) {
  std::vector<ReportedBlock> blocks;
  for (const v1::HeldBlock& h : request.held()) {
    ReportedBlock b;
    b.name = h.name();
    b.version = h.version();
    b.device = h.device();
    if (h.has_header() && h.has_mesh()) {
      auto meta = HeaderFromProto(h.header(), h.name());
      auto mesh = MeshFromProto(h.mesh());
      if (meta.ok() && mesh.ok()) {
        b.meta = *std::move(meta);
        b.mesh = *std::move(mesh);
        b.spec = SpecFromProto(h.spec());
      }
    }
    blocks.push_back(std::move(b));
  }
  return blocks;
}

RunJobCall::Services RunJobServices(const CoordinatorService::Options& options,
                                    JobService* jobs,
                                    DeadlineWatchdog* watchdog) {
  RunJobCall::Services s;
  s.jobs = jobs;
  s.admission = options.admission;
  s.threads = options.job_threads;
  s.watchdog = watchdog;
  s.gate = options.gate;
  s.max_job_time = options.max_job_time;
  return s;
}

}  // namespace

CoordinatorService::CoordinatorService(const Options& options, JobService* jobs,
                                       ArrayService* arrays, WorkerPool* pool,
                                       DeadlineWatchdog* watchdog)
    : options_(options),
      run_job_(RunJobServices(options, jobs, watchdog)),
      jobs_(jobs),
      arrays_(arrays),
      pool_(pool),
      watchdog_(watchdog) {
  if (options.admission == nullptr || options.job_threads == nullptr) {
    // A programming error: the coordinator's factory always sets both.
    spdlog::critical("CoordinatorService needs its admission and job threads");
    std::abort();
  }
  MarkMethodRawCallback(
      MethodIndex("shardmap.v1.Coordinator", "RunJob"),
      new grpc::internal::CallbackBidiHandler<grpc::ByteBuffer,
                                              grpc::ByteBuffer>(
          [this](grpc::CallbackServerContext* context) {
            return RunJobCall::Start(run_job_, context);
          }));
}

absl::Time CoordinatorService::Deadline(const grpc::ServerContext& context,
                                        absl::Time start) const {
  return CallDeadline(context, start, options_.max_job_time);
}

grpc::Status CoordinatorService::ListFunctions(
    grpc::ServerContext* context, const v1::ListFunctionsRequest* request,
    v1::ListFunctionsResponse* response) {
  const std::vector<v1::FunctionSignature> all = options_.catalog != nullptr
                                                     ? options_.catalog->List()
                                                     : pool_->Functions();
  for (const auto& f : all) *response->add_functions() = f;
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::RegisterProgram(
    grpc::ServerContext* context, const v1::RegisterProgramRequest* request,
    v1::RegisterProgramResponse* response) {
  if (options_.catalog == nullptr) {
    return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                        "this coordinator keeps no programs");
  }
  absl::StatusOr<v1::FunctionSignature> f = options_.catalog->Register(
      request->name(), request->source(), request->replace());
  if (!f.ok()) return ToGrpcStatus(f.status());
  *response->mutable_function() = *std::move(f);
  response->set_persisted(options_.catalog->persistent());
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::UnregisterProgram(
    grpc::ServerContext* context, const v1::UnregisterProgramRequest* request,
    v1::UnregisterProgramResponse* response) {
  if (options_.catalog == nullptr) {
    return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                        "this coordinator keeps no programs");
  }
  return ToGrpcStatus(options_.catalog->Unregister(request->name()));
}

grpc::Status CoordinatorService::Plan(grpc::ServerContext* context,
                                      const v1::PlanRequest* request,
                                      v1::PlanResponse* response) {
  if (options_.planner == nullptr) {
    return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                        "this coordinator does not plan jobs");
  }
  absl::StatusOr<v1::PlanResponse> plan =
      options_.planner->Plan(request->spec());
  if (!plan.ok()) return ToGrpcStatus(plan.status());
  *response = *std::move(plan);
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::GetClusterStatus(
    grpc::ServerContext* context, const v1::ClusterStatusRequest* request,
    v1::ClusterStatusResponse* response) {
  const absl::Time now = absl::Now();
  for (const auto& w : pool_->LiveWorkers()) {
    v1::WorkerInfo* info = response->add_workers();
    info->set_worker_id(w.id);
    info->set_address(w.address);
    info->set_seconds_since_heartbeat(
        absl::ToDoubleSeconds(now - w.last_heartbeat));
    if (w.rank.has_value()) info->set_rank(*w.rank);
    info->set_draining(w.draining);
  }
  response->set_expected_workers(
      static_cast<int32_t>(options_.expected_workers));
  response->set_complete(pool_->CheckComplete(options_.expected_workers).ok());
  response->set_jobs_completed(jobs_->completed());
  response->set_jobs_failed(jobs_->failed());
  const auto [running, waiting] = options_.admission->counts();
  response->set_jobs_running(running);
  response->set_jobs_waiting(waiting);
  response->set_version(SHARDMAP_VERSION);
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::ListArrays(
    grpc::ServerContext* context, const v1::ListArraysRequest* request,
    v1::ListArraysResponse* response) {
  for (auto& info : arrays_->List(request->prefix())) {
    *response->add_arrays() = std::move(info);
  }
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::DeleteArray(
    grpc::ServerContext* context, const v1::DeleteArrayRequest* request,
    v1::DeleteArrayResponse* response) {
  return ToGrpcStatus(arrays_->Delete(request->name(), request->call_id(),
                                      Deadline(*context, absl::Now())));
}

grpc::Status CoordinatorService::SaveCheckpoint(
    grpc::ServerContext* context, const v1::CheckpointRequest* request,
    v1::CheckpointResponse* response) {
  auto saved =
      arrays_->Save(request->directory(), Deadline(*context, absl::Now()));
  if (!saved.ok()) {
    const std::string reason = ReasonOf(saved.status());
    if (!reason.empty()) context->AddTrailingMetadata(kErrorReasonKey, reason);
    return ToGrpcStatus(saved.status());
  }
  for (const auto& a : *saved) {
    *response->add_arrays() = ResidentIndex::ToInfo(a, false);
  }
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::RestoreCheckpoint(
    grpc::ServerContext* context, const v1::CheckpointRequest* request,
    v1::CheckpointResponse* response) {
  auto restored =
      arrays_->Restore(request->directory(), Deadline(*context, absl::Now()));
  if (!restored.ok()) return ToGrpcStatus(restored.status());
  for (const auto& a : *restored) {
    *response->add_arrays() = ResidentIndex::ToInfo(a, false);
  }
  return grpc::Status::OK;
}

grpc::ServerUnaryReactor* RegistryService::Register(
    grpc::CallbackServerContext* context, const v1::RegisterRequest* request,
    v1::RegisterResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  std::vector<v1::FunctionSignature> functions(request->functions().begin(),
                                               request->functions().end());
  auto id = pool_->Register(
      request->address(), request->incarnation(), functions,
      request->has_rank() ? std::optional<int64_t>(request->rank())
                          : std::nullopt,
      request->inline_chunks());
  if (!id.ok()) {
    reactor->Finish(ToGrpcStatus(id.status()));
    return reactor;
  }
  response->set_worker_id(*id);
  if (index_ != nullptr && request->held_size() > 0) {
    ResidentIndex::Outcome outcome =
        index_->Report(*id, request->address(), ReportedBlocks(*request));
    for (const ReportedBlock& b : outcome.drop) {
      v1::HeldBlock* d = response->add_drop();
      d->set_name(b.name);
      d->set_version(b.version);
      d->set_device(b.device);
    }
    if (outcome.taken > 0 || !outcome.drop.empty()) {
      spdlog::info("worker {} holds {} resident blocks; {} of them dropped",
                   *id, outcome.taken, outcome.drop.size());
    }
  }
  response->set_heartbeat_interval_ms(
      absl::ToInt64Milliseconds(pool_->heartbeat_interval()));
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* RegistryService::Heartbeat(
    grpc::CallbackServerContext* context, const v1::HeartbeatRequest* request,
    v1::HeartbeatResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(pool_->Heartbeat(
      request->worker_id(), request->incarnation(), request->draining())));
  return reactor;
}

}  // namespace shardmap
