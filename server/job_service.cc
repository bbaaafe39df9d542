#include "server/job_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "core/status_util.h"
#include "rpc/trace_context.h"
#include "server/arriving_inputs.h"
#include "server/function_availability.h"
#include "server/output_streaming.h"
#include "server/planner.h"
#include "server/tree_job.h"
#include "wire/proto_convert.h"

namespace shardmap {
namespace {

// The request of a job with a call_id, without it and without how the
// client takes its answer: what a retry must repeat.
uint64_t SpecHash(const v1::JobSpec& spec) {
  v1::JobSpec copy = spec;
  copy.clear_call_id();
  copy.clear_inline_outputs();
  return absl::HashOf(copy.SerializeAsString());
}

// Answers a retried job from its first run: reads the retry's data (which
// must be the first run's), then sends the first run's result.
absl::Status Replay(const std::string& call_id,
                    const CallRegistry::Outcome& done, bool inline_outputs,
                    JobStream* stream) {
  uint64_t data_hash = 0;
  SHARD_RETURN_IF_ERROR(ReadArgumentChunks(stream, &data_hash, nullptr));
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
  return ResultWriter(stream).Answer(result, done.outputs, inline_outputs);
}

// The job's client as the runner streams it the outputs: the result is
// made when their headers are known.
class ClientSink : public ResultSink {
 public:
  using MakeResult =
      std::function<v1::JobResult(const std::vector<JobOutput>&)>;
  ClientSink(ResultWriter* writer, MakeResult make)
      : writer_(writer), make_(std::move(make)) {}

  bool Begin(const std::vector<JobOutput>& outputs) override {
    result_ = make_(outputs);
    return writer_->Result(*result_);
  }
  bool Chunk(LentChunk&& chunk) override {
    return writer_->Chunk(std::move(chunk));
  }
  // Set once Begin was called.
  const std::optional<v1::JobResult>& result() const { return result_; }

 private:
  ResultWriter* const writer_;
  const MakeResult make_;
  std::optional<v1::JobResult> result_;
};

}  // namespace

absl::Status JobService::Run(const JobCall& call, JobStream* stream) {
  const std::string job_id = absl::StrCat("job-", next_job_++);
  ScopedLogContext log_context({job_id, call.trace_id, call.span_id});
  JobEnd end;
  absl::Status s = RunJob(job_id, call, stream, &end);
  if (!s.ok()) {
    if (absl::Now() >= call.deadline &&
        (stream->cancelled() ||
         s.code() == absl::StatusCode::kDeadlineExceeded)) {
      s = absl::DeadlineExceededError(
          absl::StrCat("the job passed its deadline of ",
                       absl::FormatDuration(call.deadline - call.start), " (",
                       s.message(), ")"));
    }
    ++failed_;
    spdlog::info("{} failed: {}: {}", job_id, StatusCodeName(s.code()),
                 std::string(s.message()));
  } else if (!end.replayed) {
    ++completed_;
    spdlog::debug("{} done in {}", job_id,
                  absl::FormatDuration(absl::Now() - call.start));
  }
  if (options_.on_job_done) {
    options_.on_job_done(end.function, s.code(), absl::Now() - call.start);
  }
  return s;
}

absl::Status JobService::RunJob(const std::string& job_id, const JobCall& call,
                                JobStream* stream, JobEnd* end) {
  // Refused (by the drain gate, or the job queue) before anything is read
  // or allocated.
  SHARD_RETURN_IF_ERROR(call.refused);
  v1::RunJobRequest request;
  if (!stream->Read(&request) || !request.has_spec()) {
    return absl::InvalidArgumentError(
        "a RunJob stream must start with a JobSpec");
  }
  // Pytrees are flattened first: everything below sees one spec per leaf.
  SHARD_ASSIGN_OR_RETURN(const TreeJob tree, FlattenJobTrees(request.spec()));
  const v1::JobSpec& spec = tree.flat;
  end->function = spec.function().empty() && !spec.program().empty()
                      ? "program"
                      : spec.function();
  spdlog::debug("{}: {} on mesh of {} axes", job_id, spec.function(),
                spec.mesh().axes_size());
  if (options_.await_bring_up) {
    SHARD_RETURN_IF_ERROR(options_.await_bring_up(call.deadline));
  }
  // A call with an idempotency key runs once; a retry gets its outcome.
  std::unique_ptr<CallRegistry::Claim> claim;
  if (!spec.call_id().empty() && calls_ != nullptr) {
    SHARD_ASSIGN_OR_RETURN(
        CallRegistry::Begun begun,
        calls_->Begin(spec.call_id(), SpecHash(spec),
                      absl::StrCat("job ", spec.function()), call.deadline));
    if (begun.done != nullptr) {
      spdlog::info("{}: call_id {} ran as {}; answering the retry from it",
                   job_id, spec.call_id(), begun.done->job_id);
      end->replayed = true;
      return Replay(spec.call_id(), *begun.done, spec.inline_outputs(), stream);
    }
    claim = std::move(begun.claim);
  }
  // Jobs that use the same resident arrays are ordered here, before they
  // plan, so each plans against the versions the one before committed.
  // The plan uses the signature the locks were chosen by. An unknown
  // function takes no locks: planning reports it (after the mesh, as JAX).
  const absl::StatusOr<v1::FunctionSignature> function =
      options_.catalog != nullptr ? options_.catalog->Resolve(spec)
                                  : pool_->FindFunction(spec.function());
  std::unique_ptr<NameLocks::Held> held;
  if (function.ok()) {
    ResidentAccess access = AccessOf(spec, *function);
    SHARD_ASSIGN_OR_RETURN(
        held, locks_->Acquire(std::move(access.reads), std::move(access.writes),
                              call.deadline));
  }
  SHARD_ASSIGN_OR_RETURN(
      const JobPlan plan,
      PlanTreeJob(
          tree, [&function](const std::string&) { return function; }, index_,
          options_.programs));
  if (plan.input_bytes() > options_.max_job_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the job's arguments total ", plan.input_bytes(),
                     " bytes, over the coordinator's --max-job-bytes of ",
                     options_.max_job_bytes, " bytes"));
  }
  SHARD_ASSIGN_OR_RETURN(const std::vector<WorkerPool::Worker> workers,
                         pool_->Acquire(plan.mesh.num_devices()));
  if (plan.function.program().empty()) {
    // Plugins: every worker of the mesh must have the function, the same.
    SHARD_RETURN_IF_ERROR(
        CheckFunctionOnWorkers(plan.function.name(), workers));
  }

  uint64_t data_hash = 0;  // only a call with a key needs it
  SHARD_ASSIGN_OR_RETURN(std::unique_ptr<ArrivingInputs> inputs,
                         ArrivingInputs::ForPlan(plan));
  auto receive = [&] {
    return inputs->Receive(stream, claim != nullptr ? &data_hash : nullptr);
  };
  // The devices start while the arguments still arrive (cut-through),
  // except for a job that donates: one that fails after its workers may
  // have consumed a donation loses it, so a client's broken upload must
  // fail such a job before it starts.
  const bool donates = plan.donates();
  if (donates) SHARD_RETURN_IF_ERROR(receive());
  auto make_result = [&](const std::vector<JobOutput>& outputs) {
    v1::JobResult result;
    result.set_job_id(job_id);
    result.set_num_devices(static_cast<int32_t>(plan.mesh.num_devices()));
    for (const JobOutput& out : outputs) {
      *result.add_outputs() = HeaderToProto(out.meta.dtype, out.meta.shape);
      result.add_stored_as(out.stored_as);
    }
    AddTreeResult(spec, plan, &result);
    result.set_seconds(absl::ToDoubleSeconds(absl::Now() - call.start));
    return result;
  };
  ResultWriter writer(stream);
  ClientSink sink(&writer, make_result);
  const bool streams = MayStreamOutputs(plan, claim != nullptr);
  SHARD_ASSIGN_OR_RETURN(
      std::vector<JobOutput> outputs,
      runner_->Run(
          job_id, plan, *inputs,
          donates ? std::function<absl::Status()>() : receive, workers,
          call.deadline, [stream] { return stream->cancelled(); },
          streams ? &sink : nullptr));
  if (sink.result().has_value()) {
    // The outputs streamed (so the job has no call_id to record): only the
    // last chunk, held back for the status, is left.
    held.reset();
    if (!writer.Close()) return absl::CancelledError("client went away");
    return absl::OkStatus();
  }
  const v1::JobResult result = make_result(outputs);
  std::vector<std::shared_ptr<const Tensor>> returned;
  for (JobOutput& out : outputs) {
    returned.push_back(out.data.has_value() ? std::make_shared<const Tensor>(
                                                  *std::move(out.data))
                                            : nullptr);
  }
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
  held.reset();
  return writer.Answer(result, returned, spec.inline_outputs());
}

}  // namespace shardmap
