#include "server/coordinator_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "core/error_reason.h"
#include "core/status_util.h"
#include "rpc/grpc_status.h"
#include "rpc/trace_context.h"
#include "server/checkpoint.h"
#include "server/planner.h"
#include "wire/chunking.h"
#include "wire/proto_convert.h"

namespace shardmap {
namespace {

using JobStream =
    grpc::ServerReaderWriter<v1::RunJobResponse, v1::RunJobRequest>;

// The request of a job with a call_id, without it: what a retry must
// repeat.
uint64_t SpecHash(const v1::JobSpec& spec) {
  v1::JobSpec copy = spec;
  copy.clear_call_id();
  return absl::HashOf(copy.SerializeAsString());
}

// Folds one argument chunk into the hash of a job's data.
uint64_t ChunkHash(uint64_t hash, const v1::ArrayChunk& chunk) {
  return absl::HashOf(hash, chunk.index(), chunk.offset(),
                      absl::string_view(chunk.data()));
}

// Sends a job's result, then its returned outputs as chunks.
absl::Status SendResult(const v1::JobResult& result,
                        const std::vector<std::shared_ptr<const Tensor>>& outs,
                        JobStream* stream) {
  v1::RunJobResponse response;
  *response.mutable_result() = result;
  if (!stream->Write(response)) {
    return absl::CancelledError("client went away");
  }
  for (size_t i = 0; i < outs.size(); ++i) {
    if (outs[i] == nullptr) continue;  // stored, not returned
    const bool ok = SendTensorChunks(static_cast<uint32_t>(i), *outs[i],
                                     [&](v1::ArrayChunk&& chunk) {
                                       v1::RunJobResponse r;
                                       *r.mutable_chunk() = std::move(chunk);
                                       return stream->Write(r);
                                     });
    if (!ok) return absl::CancelledError("client went away");
  }
  return absl::OkStatus();
}

// Answers a retried job from its first run: reads the retry's data (which
// must be the first run's), then sends the first run's result.
absl::Status Replay(const std::string& call_id,
                    const CallRegistry::Outcome& done, JobStream* stream) {
  uint64_t data_hash = 0;
  v1::RunJobRequest request;
  while (stream->Read(&request)) {
    if (!request.has_chunk()) {
      return absl::InvalidArgumentError("a RunJob stream carries one JobSpec");
    }
    data_hash = ChunkHash(data_hash, request.chunk());
  }
  if (data_hash != done.data_hash) {
    return absl::InvalidArgumentError(absl::StrCat(
        "call_id '", call_id, "' was already used for ", done.job_id,
        ", with other argument data; a new call needs a new call_id"));
  }
  v1::JobResult result;
  if (!result.ParseFromString(done.response)) {
    return absl::InternalError("a kept job result does not parse");
  }
  uint64_t returned = 0;
  for (int i = 0; i < result.outputs_size(); ++i) {
    if (i < result.stored_as_size() && !result.stored_as(i).empty()) continue;
    auto meta = HeaderFromProto(result.outputs(i), "a kept output");
    if (meta.ok()) returned += meta->num_bytes();
  }
  if (!done.outputs_kept && returned > 0) {
    return absl::AlreadyExistsError(absl::StrCat(
        "call_id '", call_id, "' already ran as ", done.job_id,
        " and succeeded, but its ", returned,
        " bytes of returned outputs were not kept (over the coordinator's "
        "--call-memory-bytes); its effects on resident arrays stand"));
  }
  return SendResult(result, done.outputs, stream);
}

// Reads the argument chunks that follow the JobSpec into whole arrays;
// `data_hash`, if set, receives their ChunkHash.
absl::StatusOr<std::vector<Tensor>> ReceiveInputs(const JobPlan& plan,
                                                  JobStream* stream,
                                                  uint64_t* data_hash) {
  std::vector<Tensor> inputs;
  for (const ArgPlan& a : plan.args) {
    if (a.resident.has_value()) {
      inputs.emplace_back(DType::kFloat32, Shape{0});  // the workers fetch it
      continue;
    }
    SHARD_ASSIGN_OR_RETURN(Tensor t,
                           Tensor::Create(a.meta.dtype, a.meta.shape));
    inputs.push_back(std::move(t));
  }
  ChunkSequencer sequencer = ChunkSequencer::ForTensors(inputs, "argument");
  v1::RunJobRequest request;
  while (stream->Read(&request)) {
    if (!request.has_chunk()) {
      return absl::InvalidArgumentError("a RunJob stream carries one JobSpec");
    }
    if (data_hash != nullptr) {
      *data_hash = ChunkHash(*data_hash, request.chunk());
    }
    SHARD_RETURN_IF_ERROR(sequencer.Accept(request.chunk()));
  }
  SHARD_RETURN_IF_ERROR(sequencer.Finish());
  return inputs;
}

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

}  // namespace

grpc::Status CoordinatorService::RunJob(grpc::ServerContext* context,
                                        JobStream* stream) {
  const absl::Time start = absl::Now();
  const std::string job_id = absl::StrCat("job-", next_job_++);
  const Traceparent span = ServerSpan(*context);
  ScopedLogContext log_context({job_id, span.trace_id, span.span_id});
  const absl::Time deadline = Deadline(*context, start);
  // The workers' streams end at the deadline and the job fails with
  // DEADLINE_EXCEEDED. The watchdog, a little later, cancels the call to
  // end a read or write that waits on a stalled client (a cancelled call
  // cannot report that status).
  auto watch = watchdog_->Start(deadline + absl::Milliseconds(500),
                                [context] { context->TryCancel(); });
  std::string function;  // known once the JobSpec is read
  auto done = [&](absl::StatusCode code) {
    if (options_.on_job_done) {
      options_.on_job_done(function, code, absl::Now() - start);
    }
  };
  auto fail = [&](absl::Status s) {
    if (absl::Now() >= deadline &&
        (context->IsCancelled() ||
         s.code() == absl::StatusCode::kDeadlineExceeded)) {
      s = absl::DeadlineExceededError(absl::StrCat(
          "the job passed its deadline of ",
          absl::FormatDuration(deadline - start), " (", s.message(), ")"));
    }
    ++failed_;
    done(s.code());
    spdlog::info("{} failed: {}: {}", job_id, StatusCodeName(s.code()),
                 std::string(s.message()));
    return ToGrpcStatus(s);
  };
  std::unique_ptr<DrainGate::Pass> pass;
  if (options_.gate != nullptr) {
    auto entered = options_.gate->Enter(context);
    if (!entered.ok()) return fail(entered.status());
    pass = *std::move(entered);
  }
  // Refused before anything is read or allocated.
  struct Running {
    std::atomic<int>* n;
    ~Running() { --*n; }
  } running{&running_};
  if (const int others = running_++; options_.max_concurrent_jobs > 0 &&
                                     others >= options_.max_concurrent_jobs) {
    return fail(absl::ResourceExhaustedError(
        absl::StrCat("the coordinator already runs ", others,
                     " jobs, its --max-concurrent-jobs limit; retry later")));
  }
  v1::RunJobRequest request;
  if (!stream->Read(&request) || !request.has_spec()) {
    return fail(absl::InvalidArgumentError(
        "a RunJob stream must start with a JobSpec"));
  }
  const v1::JobSpec& spec = request.spec();
  function = spec.function();
  spdlog::debug("{}: {} on mesh of {} axes", job_id, spec.function(),
                spec.mesh().axes_size());
  if (options_.await_bring_up) {
    absl::Status up = options_.await_bring_up(deadline);
    if (!up.ok()) return fail(up);
  }
  // A call with an idempotency key runs once; a retry gets its outcome.
  std::unique_ptr<CallRegistry::Claim> claim;
  if (!spec.call_id().empty() && options_.call_registry != nullptr) {
    auto begun =
        options_.call_registry->Begin(spec.call_id(), SpecHash(spec),
                                      absl::StrCat("job ", function), deadline);
    if (!begun.ok()) return fail(begun.status());
    if (begun->done != nullptr) {
      spdlog::info("{}: call_id {} ran as {}; answering the retry from it",
                   job_id, spec.call_id(), begun->done->job_id);
      absl::Status replayed = Replay(spec.call_id(), *begun->done, stream);
      if (!replayed.ok()) return fail(replayed);
      done(absl::StatusCode::kOk);
      return grpc::Status::OK;
    }
    claim = std::move(begun->claim);
  }
  // Jobs that use the same resident arrays are ordered here, before they
  // plan, so each plans against the versions the one before committed.
  std::set<std::string> reads, writes;
  for (const std::string& n : spec.resident_args()) {
    if (!n.empty()) reads.insert(n);
  }
  for (const std::string& n : spec.resident_outputs()) {
    if (!n.empty()) writes.insert(n);
  }
  for (const auto& b : spec.states()) writes.insert(b.name());
  auto held = locks_->Acquire(reads, writes, deadline);
  if (!held.ok()) return fail(held.status());
  absl::StatusOr<JobPlan> plan = PlanJob(
      spec,
      [this](const std::string& name) { return pool_->FindFunction(name); },
      index_);
  if (!plan.ok()) return fail(plan.status());
  if (plan->input_bytes() > options_.max_job_bytes) {
    return fail(absl::ResourceExhaustedError(
        absl::StrCat("the job's arguments total ", plan->input_bytes(),
                     " bytes, over the coordinator's --max-job-bytes of ",
                     options_.max_job_bytes, " bytes")));
  }
  auto workers = pool_->Acquire(plan->mesh.num_devices());
  if (!workers.ok()) return fail(workers.status());

  uint64_t data_hash = 0;  // only a call with a key needs it
  auto inputs =
      ReceiveInputs(*plan, stream, claim != nullptr ? &data_hash : nullptr);
  if (!inputs.ok()) return fail(inputs.status());
  auto outputs =
      runner_->Run(job_id, *plan, *std::move(inputs), *workers, deadline,
                   [context] { return context->IsCancelled(); });
  if (!outputs.ok()) return fail(outputs.status());

  held->reset();
  v1::JobResult result;
  result.set_job_id(job_id);
  result.set_num_devices(static_cast<int32_t>(plan->mesh.num_devices()));
  std::vector<std::shared_ptr<const Tensor>> returned;
  for (JobOutput& out : *outputs) {
    *result.add_outputs() = HeaderToProto(out.meta.dtype, out.meta.shape);
    result.add_stored_as(out.stored_as);
    returned.push_back(out.data.has_value() ? std::make_shared<const Tensor>(
                                                  *std::move(out.data))
                                            : nullptr);
  }
  result.set_seconds(absl::ToDoubleSeconds(absl::Now() - start));
  // The job is applied: from here a retry with its call_id must get this
  // answer, even if this one never reaches the client.
  if (claim != nullptr) {
    auto outcome = std::make_shared<CallRegistry::Outcome>();
    outcome->job_id = job_id;
    outcome->response = result.SerializeAsString();
    outcome->outputs = returned;
    outcome->data_hash = data_hash;
    claim->Finish(std::move(outcome));
  }
  if (absl::Status sent = SendResult(result, returned, stream); !sent.ok()) {
    return fail(sent);
  }
  ++completed_;
  done(absl::StatusCode::kOk);
  spdlog::debug("{} done in {}", job_id,
                absl::FormatDuration(absl::Now() - start));
  return grpc::Status::OK;
}

absl::Time CoordinatorService::Deadline(const grpc::ServerContext& context,
                                        absl::Time start) const {
  return std::min(start + options_.max_job_time,
                  absl::FromChrono(context.deadline()));
}

grpc::Status CoordinatorService::ListFunctions(
    grpc::ServerContext* context, const v1::ListFunctionsRequest* request,
    v1::ListFunctionsResponse* response) {
  for (const auto& f : pool_->Functions()) *response->add_functions() = f;
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
  response->set_jobs_completed(completed_);
  response->set_jobs_failed(failed_);
  response->set_version(SHARDMAP_VERSION);
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::ListArrays(
    grpc::ServerContext* context, const v1::ListArraysRequest* request,
    v1::ListArraysResponse* response) {
  for (auto& info : index_->List(request->prefix())) {
    *response->add_arrays() = std::move(info);
  }
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::DeleteArray(
    grpc::ServerContext* context, const v1::DeleteArrayRequest* request,
    v1::DeleteArrayResponse* response) {
  const absl::Time deadline = Deadline(*context, absl::Now());
  std::unique_ptr<CallRegistry::Claim> claim;
  if (!request->call_id().empty() && options_.call_registry != nullptr) {
    auto begun = options_.call_registry->Begin(
        request->call_id(),
        absl::HashOf(std::string("delete"), request->name()),
        absl::StrCat("delete '", request->name(), "'"), deadline);
    if (!begun.ok()) return ToGrpcStatus(begun.status());
    if (begun->done != nullptr) return grpc::Status::OK;  // deleted before
    claim = std::move(begun->claim);
  }
  auto held = locks_->Acquire({}, {request->name()}, deadline);
  if (!held.ok()) return ToGrpcStatus(held.status());
  auto removed = index_->Remove(request->name());
  if (!removed.ok()) return ToGrpcStatus(removed.status());
  if (claim != nullptr)
    claim->Finish(std::make_shared<CallRegistry::Outcome>());
  // Freeing the blocks is best effort: a worker that is gone has freed
  // them already. A device nobody reported since a restart has no holder.
  for (const std::string& address : removed->addresses) {
    if (address.empty()) continue;
    absl::Status s = calls_->DropArray(address, request->name(), deadline);
    if (!s.ok()) {
      spdlog::info("dropping '{}' on {}: {}", request->name(), address,
                   std::string(s.message()));
    }
  }
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::SaveCheckpoint(
    grpc::ServerContext* context, const v1::CheckpointRequest* request,
    v1::CheckpointResponse* response) {
  // Hold every array still while it is written.
  std::set<std::string> names;
  for (const auto& a : index_->All()) names.insert(a.name);
  const absl::Time deadline = Deadline(*context, absl::Now());
  auto held = locks_->Acquire(names, {}, deadline);
  if (!held.ok()) return ToGrpcStatus(held.status());
  auto saved = shardmap::SaveCheckpoint(request->directory(), *index_, *calls_,
                                        deadline);
  if (!saved.ok()) {
    const std::string reason = ReasonOf(saved.status());
    if (!reason.empty()) context->AddTrailingMetadata(kErrorReasonKey, reason);
    return ToGrpcStatus(saved.status());
  }
  for (const auto& a : *saved)
    *response->add_arrays() = ResidentIndex::ToInfo(a, false);
  spdlog::info("saved {} resident arrays to {}", saved->size(),
               request->directory());
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::RestoreCheckpoint(
    grpc::ServerContext* context, const v1::CheckpointRequest* request,
    v1::CheckpointResponse* response) {
  auto restored =
      shardmap::RestoreCheckpoint(request->directory(), *index_, *pool_,
                                  *calls_, Deadline(*context, absl::Now()));
  if (!restored.ok()) return ToGrpcStatus(restored.status());
  for (const auto& a : *restored) {
    *response->add_arrays() = ResidentIndex::ToInfo(a, false);
  }
  spdlog::info("restored {} resident arrays from {}", restored->size(),
               request->directory());
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
                          : std::nullopt);
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
