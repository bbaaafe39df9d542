#include "worker/worker_service.h"

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "core/chunking.h"
#include "core/digest.h"
#include "core/proto_convert.h"
#include "core/status_util.h"

namespace shardmap {
namespace {

// Reads the job header and argument chunks into a ShardCall.
absl::StatusOr<ShardCall> ReceiveCall(
    grpc::ServerReaderWriter<v1::ShardResponse, v1::ShardRequest>* stream,
    uint64_t max_job_bytes, std::vector<bool>* send_outputs) {
  v1::ShardRequest request;
  if (!stream->Read(&request) || !request.has_job()) {
    return absl::InvalidArgumentError(
        "RunShard stream must start with a ShardJob");
  }
  const v1::ShardJob& job = request.job();
  ShardCall call;
  call.job_id = job.job_id();
  call.function = job.function();
  SHARD_ASSIGN_OR_RETURN(call.mesh, MeshFromProto(job.mesh()));
  call.device_id = job.device_id();
  call.kwargs_json = job.kwargs_json();
  send_outputs->assign(job.send_outputs().begin(), job.send_outputs().end());
  uint64_t total = 0;
  for (int i = 0; i < job.args_size(); ++i) {
    SHARD_ASSIGN_OR_RETURN(
        ArrayMeta meta,
        HeaderFromProto(job.args(i), absl::StrCat("args[", i, "]")));
    total += meta.num_bytes();
    if (total > max_job_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "job ", job.job_id(), " brings more than ", max_job_bytes,
          " argument bytes to device ", job.device_id()));
    }
    SHARD_ASSIGN_OR_RETURN(Tensor t, Tensor::Create(meta.dtype, meta.shape));
    call.args.push_back(std::move(t));
  }
  ChunkSequencer sequencer = ChunkSequencer::ForTensors(call.args, "argument");
  while (stream->Read(&request)) {
    if (!request.has_chunk()) {
      return absl::InvalidArgumentError("a second ShardJob in one stream");
    }
    SHARD_RETURN_IF_ERROR(sequencer.Accept(request.chunk()));
  }
  SHARD_RETURN_IF_ERROR(sequencer.Finish());
  return call;
}

}  // namespace

grpc::Status WorkerService::RunShard(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<v1::ShardResponse, v1::ShardRequest>* stream) {
  std::vector<bool> send_outputs;
  absl::StatusOr<ShardCall> call =
      ReceiveCall(stream, options_.max_job_bytes, &send_outputs);
  if (!call.ok()) return ToGrpcStatus(call.status());
  const std::string job_id = call->job_id;
  const int64_t device = call->device_id;
  spdlog::debug("job {}: device {} runs {}", job_id, device, call->function);

  absl::StatusOr<std::vector<Tensor>> outputs =
      executor_->Run(*std::move(call));
  if (!outputs.ok()) return ToGrpcStatus(outputs.status());
  if (context->IsCancelled()) {
    return grpc::Status(grpc::StatusCode::CANCELLED, "job cancelled");
  }

  v1::ShardResponse response;
  v1::ShardOutputs* header = response.mutable_outputs();
  for (const Tensor& t : *outputs) {
    *header->add_outputs() = HeaderToProto(t.dtype(), t.shape());
    header->add_digests(Digest(t));
  }
  if (!stream->Write(response)) {
    return grpc::Status(grpc::StatusCode::CANCELLED, "coordinator went away");
  }
  for (size_t i = 0; i < outputs->size(); ++i) {
    if (i < send_outputs.size() && !send_outputs[i]) continue;
    const bool ok = SendTensorChunks(static_cast<uint32_t>(i), (*outputs)[i],
                                     [&](v1::ArrayChunk&& chunk) {
                                       v1::ShardResponse r;
                                       *r.mutable_chunk() = std::move(chunk);
                                       return stream->Write(r);
                                     });
    if (!ok) {
      return grpc::Status(grpc::StatusCode::CANCELLED, "coordinator went away");
    }
  }
  return grpc::Status::OK;
}

}  // namespace shardmap
