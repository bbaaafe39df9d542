#include "client/shard_client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <thread>
#include <variant>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "client/job_answer.h"
#include "core/error_reason.h"
#include "core/status_util.h"
#include "rpc/channel.h"
#include "rpc/chunk_message.h"
#include "rpc/grpc_status.h"
#include "rpc/trace_context.h"
#include "wire/chunking.h"
#include "wire/proto_convert.h"
#include "wire/tail_writer.h"

namespace shardmap {
namespace {

constexpr char kNotSafeToRetry[] = "type.shardmap.dev/not-safe-to-retry";
// Jobs whose argument bytes are at most this are sent without a second
// thread (well under gRPC's initial 64 KiB stream window).
constexpr size_t kInlineJobBytes = 16 * 1024;

// A failure after which a state-changing call may or may not have been
// applied: the connection or the deadline ended it, not the coordinator's
// answer.
bool OutcomeUnknown(const absl::Status& s) {
  return s.code() == absl::StatusCode::kUnavailable ||
         s.code() == absl::StatusCode::kDeadlineExceeded ||
         s.code() == absl::StatusCode::kCancelled;
}

// gRPC's server ends a call whose deadline passed by resetting its stream,
// which a client whose own deadline timer has not fired yet reads as
// CANCELLED. A call this client did not cancel that ended CANCELLED once
// its deadline had passed ended by its deadline.
absl::Status DeadlineIfPast(absl::Status s, absl::Time deadline) {
  if (s.code() != absl::StatusCode::kCancelled || absl::Now() < deadline) {
    return s;
  }
  return absl::DeadlineExceededError(
      absl::StrCat("the job passed its deadline (", s.message(), ")"));
}

absl::Status MarkNotSafeToRetry(const absl::Status& s, absl::string_view what) {
  absl::Status marked(
      s.code(),
      absl::StrCat(s.message(), " (", what,
                   " changes resident state and had no call_id, so it may or "
                   "may not have been applied and is not safe to send again; "
                   "check the state, or give calls a call_id)"));
  marked.SetPayload(kNotSafeToRetry, absl::Cord("1"));
  return marked;
}

absl::Status StatusOf(const absl::Status& s) { return s; }
template <typename T>
absl::Status StatusOf(const absl::StatusOr<T>& s) {
  return s.status();
}

}  // namespace

bool WritesState(const JobRequest& job) {
  if (!job.states.empty()) return true;
  for (const std::string& name : job.resident_outputs) {
    if (!name.empty()) return true;
  }
  return false;
}

bool ShardClient::NotSafeToRetry(const absl::Status& status) {
  return status.GetPayload(kNotSafeToRetry).has_value();
}

template <typename F>
auto ShardClient::Retrying(bool safe, F attempt, absl::Time deadline) const
    -> decltype(attempt()) {
  absl::Duration backoff = absl::Milliseconds(200);
  for (int tries = 0;; ++tries) {
    auto result = attempt();
    const absl::Status s = StatusOf(result);
    if (s.ok() || s.code() != absl::StatusCode::kUnavailable || !safe ||
        tries >= options_.retries || absl::Now() + backoff >= deadline) {
      return result;
    }
    absl::SleepFor(backoff);
    backoff = std::min(2 * backoff, absl::Seconds(5));
  }
}

ShardClient::ShardClient(const Options& options) : options_(options) {
  std::shared_ptr<grpc::Channel> channel =
      options_.security ? MakeChannel(options_.address, *options_.security)
                        : MakeChannel(options_.address);
  stub_ = v1::Coordinator::NewStub(channel);
  run_job_ = std::make_unique<RawBidiMethod>(channel,
                                             "/shardmap.v1.Coordinator/RunJob");
}

absl::StatusOr<std::unique_ptr<ShardClient>> ShardClient::Create(
    const Options& options) {
  if (options.address.empty()) {
    return absl::InvalidArgumentError("coordinator address is empty");
  }
  return std::unique_ptr<ShardClient>(new ShardClient(options));
}

absl::StatusOr<JobResult> ShardClient::Run(const JobRequest& job) const {
  const bool writes = WritesState(job);
  if (writes && job.call_id.empty() && options_.retries > 0) {
    SHARD_ASSIGN_OR_RETURN(std::string call_id, NewRandomToken());
    JobRequest keyed = job;
    keyed.call_id = std::move(call_id);
    return Run(keyed);
  }
  // One deadline and one trace for every attempt: --timeout bounds the
  // whole call, and the retries show as one trace.
  std::string traceparent = job.traceparent;
  if (traceparent.empty()) {
    traceparent = Traceparent::New().ToString();
  } else if (!Traceparent::Parse(traceparent).has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("traceparent must be 00-<32 hex>-<16 hex>-<2 hex> "
                     "(W3C trace context), got '",
                     traceparent, "'"));
  }
  const absl::Time deadline = absl::Now() + job.timeout;
  const bool safe = !writes || !job.call_id.empty();
  absl::StatusOr<JobResult> r = Retrying(
      safe, [&] { return RunOnce(job, deadline, traceparent); }, deadline);
  if (!r.ok() && !safe && OutcomeUnknown(r.status())) {
    return MarkNotSafeToRetry(r.status(),
                              absl::StrCat("the job ", job.function));
  }
  return r;
}

absl::StatusOr<JobResult> ShardClient::RunOnce(
    const JobRequest& job, absl::Time deadline,
    const std::string& traceparent) const {
  v1::RunJobRequest request;
  v1::JobSpec* spec = request.mutable_spec();
  *spec = JobSpecOf(job, options_.default_mesh);
  spec->set_call_id(job.call_id);
  spec->set_inline_outputs(true);  // small answers come as one message

  // Arguments that travel on the stream (resident ones do not).
  std::vector<const Tensor*> sent(job.args.size(), nullptr);
  size_t sent_bytes = request.ByteSizeLong();
  for (size_t i = 0; i < job.args.size(); ++i) {
    if (job.args[i] == nullptr ||
        (i < job.resident_args.size() && !job.resident_args[i].empty())) {
      continue;
    }
    sent[i] = job.args[i];
    sent_bytes += job.args[i]->num_bytes();
  }
  // A small job is written at once, on this thread, its first message with
  // the call's headers and its last with the half-close: it fits the stream's
  // flow-control window, so the writes never wait for the coordinator to read.
  const bool small = sent_bytes <= kInlineJobBytes;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(deadline));
  context.AddMetadata(kTraceparentKey, traceparent);
  if (small) context.set_initial_metadata_corked(true);
  const std::unique_ptr<RawBidiMethod::Stream> stream =
      run_job_->Call(&context);
  auto send = [&] {
    using Outgoing = std::variant<v1::RunJobRequest, LentChunk>;
    TailWriter<Outgoing> out([&](const Outgoing& message, bool last) {
      const auto* chunk = std::get_if<LentChunk>(&message);
      return chunk != nullptr
                 ? WriteChunkMessage(stream.get(),
                                     v1::RunJobRequest::kChunkFieldNumber,
                                     *chunk, last)
                 : WriteMessage(stream.get(),
                                std::get<v1::RunJobRequest>(message), last);
    });
    if (!out.Push(std::move(request))) return;
    for (size_t i = 0; i < sent.size(); ++i) {
      if (sent[i] == nullptr) continue;
      // Copied once, into gRPC's own slices (no owner to lend with): gRPC
      // may hold a slice after the call ends, past the caller's tensors.
      const bool ok = LendBytesChunks(
          static_cast<uint32_t>(i), sent[i]->data(), sent[i]->num_bytes(),
          nullptr,
          [&out](LentChunk&& chunk) { return out.Push(std::move(chunk)); });
      if (!ok) return;
    }
    out.Close();
  };
  // A larger one is sent on a second thread while this one reads, so a
  // coordinator that rejects the job early answers at once instead of
  // after the upload.
  std::thread sender;
  if (small) {
    send();
  } else {
    sender = std::thread(send);
  }

  JobResult result;
  result.traceparent = traceparent;
  absl::Status status = ReadJobAnswer(stream.get(), &result);
  if (!status.ok()) context.TryCancel();
  if (sender.joinable()) sender.join();
  absl::Status rpc = FromGrpcStatus(stream->Finish());
  if (status.ok()) rpc = DeadlineIfPast(std::move(rpc), deadline);
  if (!rpc.ok()) return rpc;
  if (!status.ok()) return status;
  return result;
}

absl::StatusOr<std::vector<v1::FunctionSignature>> ShardClient::ListFunctions()
    const {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + options_.rpc_timeout));
  v1::ListFunctionsResponse response;
  grpc::Status s =
      stub_->ListFunctions(&context, v1::ListFunctionsRequest(), &response);
  if (!s.ok()) return FromGrpcStatus(s);
  return std::vector<v1::FunctionSignature>(response.functions().begin(),
                                            response.functions().end());
}

absl::StatusOr<v1::ClusterStatusResponse> ShardClient::Status() const {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + options_.rpc_timeout));
  v1::ClusterStatusResponse response;
  grpc::Status s =
      stub_->GetClusterStatus(&context, v1::ClusterStatusRequest(), &response);
  if (!s.ok()) return FromGrpcStatus(s);
  return response;
}

absl::StatusOr<v1::ResidentInfo> ShardClient::Put(
    const std::string& name, const Tensor& array, const Mesh& mesh,
    const PartitionSpec& spec, bool overwrite,
    const std::string& call_id) const {
  // A put is the job identity(array) with the output stored.
  JobRequest job;
  job.function = "identity";
  job.mesh = mesh;
  job.args = {&array};
  job.in_specs = {spec};
  job.out_specs = {spec};
  job.resident_outputs = {name};
  job.overwrite = overwrite;
  job.call_id = call_id;
  SHARD_RETURN_IF_ERROR(Run(job).status());
  SHARD_ASSIGN_OR_RETURN(std::vector<v1::ResidentInfo> found, List(name));
  for (const auto& info : found) {
    if (info.name() == name) return info;
  }
  return absl::InternalError(
      absl::StrCat("put '", name, "' but it is not listed"));
}

absl::StatusOr<Tensor> ShardClient::Get(const std::string& name) const {
  SHARD_ASSIGN_OR_RETURN(std::vector<v1::ResidentInfo> found, List(name));
  const v1::ResidentInfo* info = nullptr;
  for (const auto& i : found) {
    if (i.name() == name) info = &i;
  }
  if (info == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("no resident array named '", name, "'"));
  }
  // A get is identity of the resident array in its own sharding.
  JobRequest job;
  job.function = "identity";
  SHARD_ASSIGN_OR_RETURN(job.mesh, MeshFromProto(info->mesh()));
  job.args = {nullptr};
  job.resident_args = {name};
  job.in_specs = {SpecFromProto(info->spec())};
  job.out_specs = {SpecFromProto(info->spec())};
  SHARD_ASSIGN_OR_RETURN(JobResult r, Run(job));
  if (r.outputs.size() != 1)
    return absl::InternalError("get returned no array");
  return std::move(r.outputs[0]);
}

absl::StatusOr<std::vector<v1::ResidentInfo>> ShardClient::List(
    const std::string& prefix) const {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + options_.rpc_timeout));
  v1::ListArraysRequest request;
  request.set_prefix(prefix);
  v1::ListArraysResponse response;
  grpc::Status s = stub_->ListArrays(&context, request, &response);
  if (!s.ok()) return FromGrpcStatus(s);
  return std::vector<v1::ResidentInfo>(response.arrays().begin(),
                                       response.arrays().end());
}

absl::Status ShardClient::Delete(const std::string& name,
                                 const std::string& call_id) const {
  v1::DeleteArrayRequest request;
  request.set_name(name);
  request.set_call_id(call_id);
  absl::Status s = Retrying(!call_id.empty(), [&] {
    grpc::ClientContext context;
    context.set_deadline(
        absl::ToChronoTime(absl::Now() + options_.rpc_timeout));
    v1::DeleteArrayResponse response;
    return FromGrpcStatus(stub_->DeleteArray(&context, request, &response));
  });
  if (!s.ok() && call_id.empty() && OutcomeUnknown(s)) {
    return MarkNotSafeToRetry(s, absl::StrCat("deleting '", name, "'"));
  }
  return s;
}

absl::StatusOr<std::vector<v1::ResidentInfo>> ShardClient::Save(
    const std::string& directory) const {
  // Idempotent: the directory is replaced whole by the arrays as they are.
  return Retrying(true,
                  [&] { return Checkpoint(directory, /*restore=*/false); });
}

absl::StatusOr<std::vector<v1::ResidentInfo>> ShardClient::Restore(
    const std::string& directory) const {
  // Idempotent too: a repeat restores the same arrays from the same files.
  return Retrying(true,
                  [&] { return Checkpoint(directory, /*restore=*/true); });
}

absl::StatusOr<std::vector<v1::ResidentInfo>> ShardClient::Checkpoint(
    const std::string& directory, bool restore) const {
  grpc::ClientContext context;
  // Every block of every array is written or read: allow minutes.
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Minutes(10)));
  v1::CheckpointRequest request;
  request.set_directory(directory);
  v1::CheckpointResponse response;
  grpc::Status s = restore
                       ? stub_->RestoreCheckpoint(&context, request, &response)
                       : stub_->SaveCheckpoint(&context, request, &response);
  if (!s.ok()) {
    absl::Status status = FromGrpcStatus(s);
    const auto& trailers = context.GetServerTrailingMetadata();
    auto reason = trailers.find(kErrorReasonKey);
    if (reason != trailers.end()) {
      status = WithReason(status, absl::string_view(reason->second.data(),
                                                    reason->second.size()));
    }
    return status;
  }
  return std::vector<v1::ResidentInfo>(response.arrays().begin(),
                                       response.arrays().end());
}

absl::Status ShardClient::WaitForWorkers(int n, absl::Duration timeout) const {
  const absl::Time end = absl::Now() + timeout;
  int live = 0;
  absl::Status last;
  while (absl::Now() < end) {
    auto status = Status();
    if (status.ok()) {
      live = status->workers_size();
      if (live >= n) return absl::OkStatus();
    } else {
      last = status.status();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "waited ", absl::FormatDuration(timeout), " for ", n, " workers; ", live,
      " registered",
      last.ok() ? "" : absl::StrCat(" (last error: ", last.message(), ")")));
}

}  // namespace shardmap
