#include "worker/worker_service.h"

#include <cstring>
#include <memory>

#include "core/status_util.h"
#include "rpc/chunk_message.h"
#include "rpc/grpc_status.h"
#include "rpc/raw_stream_adapter.h"
#include "rpc/trace_context.h"
#include "wire/chunking.h"
#include "worker/inline_call.h"
#include "worker/shard_link_service.h"
#include "worker/store/block_fetch.h"
#include "worker/store/checkpoint_blocks.h"

namespace shardmap {

// The RunShard call as the job sees it.
using GrpcShardStream =
    RawStreamAdapter<ShardStream, v1::ShardRequest, v1::ShardResponse>;

grpc::Status WorkerService::RunShard(grpc::ServerContext* context,
                                     RawServerStream* stream) {
  GrpcShardStream shard_stream(context, stream);
  return ToGrpcStatus(RunCall(&shard_stream,
                              absl::FromChrono(context->deadline()),
                              ServerSpan(*context), context));
}

grpc::ServerBidiReactor<v1::ShardLinkRequest, v1::ShardLinkResponse>*
WorkerService::RunShards(grpc::CallbackServerContext* context) {
  return new ShardLinkReactor(
      &link_threads_, options_.gate,
      [this](ShardStream* stream, absl::Time deadline,
             const std::string& trace) {
        return RunCall(stream, deadline, ChildSpan(trace), nullptr);
      },
      [this](const v1::ShardRequest& first) {
        return RunsInline(first, *job_services_.executor, sequencer_);
      });
}

absl::Status WorkerService::RunCall(ShardStream* stream, absl::Time deadline,
                                    const Traceparent& span,
                                    grpc::ServerContextBase* gate_context) {
  std::unique_ptr<DrainGate::Pass> pass;
  if (options_.gate != nullptr) {
    SHARD_ASSIGN_OR_RETURN(pass, options_.gate->Enter(gate_context));
  }
  ShardJob::Options job_options;
  job_options.max_job_bytes = options_.max_job_bytes;
  job_options.collective_timeout = options_.collective_timeout;
  ShardJob job(job_options, job_services_, stream, deadline);
  SHARD_RETURN_IF_ERROR(job.Receive());
  ScopedLogContext log_context({job.job_id(), span.trace_id, span.span_id});
  return job.Run();
}

grpc::Status WorkerService::ReadBlock(
    grpc::ServerContext* context, const v1::ReadBlockRequest* request,
    grpc::ServerWriter<v1::ArrayChunk>* writer) {
  absl::StatusOr<std::string> bytes = ReadLocalBox(*store_, *request);
  if (!bytes.ok()) return ToGrpcStatus(bytes.status());
  const bool ok = SendChunks(
      0, bytes->size(),
      [&](size_t offset, size_t length, uint8_t* dst) {
        std::memcpy(dst, bytes->data() + offset, length);
      },
      [&](v1::ArrayChunk&& chunk) { return writer->Write(chunk); });
  if (!ok) return grpc::Status(grpc::StatusCode::CANCELLED, "reader went away");
  return grpc::Status::OK;
}

grpc::Status WorkerService::DropArray(grpc::ServerContext* context,
                                      const v1::DropArrayRequest* request,
                                      v1::DropArrayResponse* response) {
  // A version: only that one, which a job wrote and the coordinator did
  // not commit.
  if (request->version() != 0) {
    return ToGrpcStatus(store_->Drop(request->name(), request->version()));
  }
  return ToGrpcStatus(store_->Drop(request->name()));
}

grpc::Status WorkerService::SkipTickets(grpc::ServerContext* context,
                                        const v1::SkipTicketsRequest* request,
                                        v1::SkipTicketsResponse* response) {
  if (sequencer_ == nullptr) return grpc::Status::OK;
  for (uint64_t ticket : request->tickets()) {
    sequencer_->Skip(request->worker_id(), ticket);
  }
  return grpc::Status::OK;
}

grpc::Status WorkerService::SaveBlock(grpc::ServerContext* context,
                                      const v1::SaveBlockRequest* request,
                                      v1::SaveBlockResponse* response) {
  absl::StatusOr<uint64_t> digest = SaveCheckpointBlock(*store_, *request);
  if (!digest.ok()) return ToGrpcStatus(digest.status());
  response->set_digest(*digest);
  return grpc::Status::OK;
}

grpc::Status WorkerService::LoadBlock(grpc::ServerContext* context,
                                      const v1::LoadBlockRequest* request,
                                      v1::LoadBlockResponse* response) {
  return ToGrpcStatus(LoadCheckpointBlock(*store_, *request));
}

}  // namespace shardmap
