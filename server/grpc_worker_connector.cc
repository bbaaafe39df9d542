#include "server/grpc_worker_connector.h"

#include <grpcpp/grpcpp.h>

#include <functional>

#include "core/status_util.h"
#include "rpc/chunk_message.h"
#include "rpc/grpc_status.h"
#include "rpc/raw_method.h"
#include "rpc/trace_context.h"
#include "server/link_call.h"

namespace shardmap {
namespace {

// Worker.RunShard over byte buffers, so that argument chunks leave without
// a copy (rpc/chunk_message.h); ChannelCache::Stub keeps one per channel.
struct RawWorker {
  using Stub = RawBidiMethod;
  static std::unique_ptr<Stub> NewStub(
      const std::shared_ptr<grpc::Channel>& channel) {
    return std::make_unique<Stub>(channel, "/shardmap.v1.Worker/RunShard");
  }
};

// The call starts at the first Write, not in the constructor: starting it
// can block while the connection is made (a stopped worker accepts TCP but
// never answers), and Cancel must already work then.
class GrpcShardChannel final : public ShardChannel {
 public:
  // `ended` is called with the call's final status.
  GrpcShardChannel(std::shared_ptr<RawWorker::Stub> stub, absl::Time deadline,
                   std::function<void(const absl::Status&)> ended)
      : stub_(std::move(stub)), ended_(std::move(ended)) {
    context_.set_deadline(absl::ToChronoTime(deadline));
    // The call's headers leave with its first message, not on their own.
    context_.set_initial_metadata_corked(true);
    // The job's trace, with the coordinator's span as the workers' parent.
    const LogContext& log = CurrentLogContext();
    if (!log.trace_id.empty()) {
      context_.AddMetadata(kTraceparentKey,
                           Traceparent{log.trace_id, log.span_id}.ToString());
    }
  }
  bool Write(const v1::ShardRequest& request) override {
    return WriteMessage(&Start(), request, false);
  }
  bool WriteLast(const v1::ShardRequest& request) override {
    return WriteMessage(&Start(), request, true);
  }
  bool WriteChunk(const LentChunk& chunk, bool last) override {
    return WriteChunkMessage(&Start(), v1::ShardRequest::kChunkFieldNumber,
                             chunk, last);
  }
  bool WritesDone() override { return stream_ && stream_->WritesDone(); }
  bool Read(v1::ShardResponse* response) override {
    if (stream_ && ReadMessage(stream_.get(), response, &malformed_)) {
      return true;
    }
    if (malformed_) context_.TryCancel();
    return false;
  }
  bool ReadChunked(v1::ShardResponse* response,
                   std::optional<ReceivedChunk>* chunk) override {
    chunk->reset();
    if (stream_ && shardmap::ReadChunked(stream_.get(),
                                         v1::ShardResponse::kChunkFieldNumber,
                                         response, chunk, &malformed_)) {
      return true;
    }
    if (malformed_) context_.TryCancel();
    return false;
  }
  absl::Status Finish() override {
    if (!stream_) return absl::CancelledError("the call never started");
    absl::Status s = FromGrpcStatus(stream_->Finish());
    if (malformed_) {
      s = absl::InternalError(
          "the worker sent a message that is not a shardmap.v1.ShardResponse");
    }
    ended_(s);
    return s;
  }
  void Cancel() override { context_.TryCancel(); }

 private:
  RawBidiMethod::Stream& Start() {
    if (!stream_) stream_ = stub_->Call(&context_);
    return *stream_;
  }

  const std::shared_ptr<RawWorker::Stub> stub_;
  const std::function<void(const absl::Status&)> ended_;
  grpc::ClientContext context_;
  std::unique_ptr<RawBidiMethod::Stream> stream_;
  bool malformed_ = false;
};

}  // namespace

std::unique_ptr<ShardChannel> GrpcWorkerConnector::Open(
    const std::string& address, absl::Time deadline) {
  std::shared_ptr<grpc::Channel> channel;
  std::shared_ptr<RawWorker::Stub> stub =
      channels_->Stub<RawWorker>(address, &channel);
  return std::make_unique<GrpcShardChannel>(
      std::move(stub), deadline,
      [channels = channels_, address, channel](const absl::Status& s) {
        channels->OnCallEnded(address, channel, s);
      });
}

std::unique_ptr<ShardChannel> GrpcWorkerConnector::OpenSmall(
    const std::string& address, absl::Time deadline) {
  return std::make_unique<LinkCall>(
      &links_, address, deadline,
      [this, address, deadline] { return Open(address, deadline); });
}

std::unique_ptr<ShardChannel> GrpcWorkerConnector::OpenSmallIfUp(
    const std::string& address, absl::Time deadline) {
  return std::make_unique<LinkCall>(
      &links_, address, deadline,
      [this, address, deadline] { return Open(address, deadline); },
      /*wait_for_link=*/false);
}

template <typename Request, typename Response>
absl::Status GrpcWorkerConnector::Unary(
    const std::string& address, absl::Time deadline,
    grpc::Status (v1::Worker::Stub::*method)(grpc::ClientContext*,
                                             const Request&, Response*),
    const Request& request) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(deadline));
  Response response;
  std::shared_ptr<grpc::Channel> channel;
  absl::Status s =
      FromGrpcStatus(((*channels_->Stub<v1::Worker>(address, &channel)).*
                      method)(&context, request, &response));
  channels_->OnCallEnded(address, channel, s);
  return s;
}

absl::Status GrpcWorkerConnector::SkipTickets(
    const std::string& address, const v1::SkipTicketsRequest& request,
    absl::Time deadline) {
  return Unary(address, deadline, &v1::Worker::Stub::SkipTickets, request);
}

absl::Status GrpcWorkerConnector::DropVersion(const std::string& address,
                                              const std::string& name,
                                              uint64_t version,
                                              absl::Time deadline) {
  v1::DropArrayRequest request;
  request.set_name(name);
  request.set_version(version);
  return Unary(address, deadline, &v1::Worker::Stub::DropArray, request);
}

}  // namespace shardmap
