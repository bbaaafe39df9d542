#include "server/grpc_worker_connector.h"

#include <grpcpp/grpcpp.h>

#include "core/channel.h"
#include "core/status_util.h"
#include "core/trace_context.h"

namespace shardmap {
namespace {

// The call starts at the first Write, not in the constructor: starting it
// can block while the connection is made (a stopped worker accepts TCP but
// never answers), and Cancel must already work then.
class GrpcShardChannel final : public ShardChannel {
 public:
  GrpcShardChannel(std::shared_ptr<v1::Worker::Stub> stub, absl::Time deadline)
      : stub_(std::move(stub)) {
    context_.set_deadline(absl::ToChronoTime(deadline));
    // The job's trace, with the coordinator's span as the workers' parent.
    const LogContext& log = CurrentLogContext();
    if (!log.trace_id.empty()) {
      context_.AddMetadata(kTraceparentKey,
                           Traceparent{log.trace_id, log.span_id}.ToString());
    }
  }
  bool Write(const v1::ShardRequest& request) override {
    if (!stream_) stream_ = stub_->RunShard(&context_);
    return stream_->Write(request);
  }
  bool WritesDone() override { return stream_ && stream_->WritesDone(); }
  bool Read(v1::ShardResponse* response) override {
    return stream_ && stream_->Read(response);
  }
  absl::Status Finish() override {
    if (!stream_) return absl::CancelledError("the call never started");
    return FromGrpcStatus(stream_->Finish());
  }
  void Cancel() override { context_.TryCancel(); }

 private:
  std::shared_ptr<v1::Worker::Stub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::ShardRequest, v1::ShardResponse>>
      stream_;
};

}  // namespace

std::shared_ptr<v1::Worker::Stub> GrpcWorkerConnector::Stub(
    const std::string& address) {
  absl::MutexLock lock(&mu_);
  auto& slot = stubs_[address];
  if (!slot) slot = v1::Worker::NewStub(MakeChannel(address));
  return slot;
}

std::unique_ptr<ShardChannel> GrpcWorkerConnector::Open(
    const std::string& address, absl::Time deadline) {
  return std::make_unique<GrpcShardChannel>(Stub(address), deadline);
}

absl::Status GrpcWorkerConnector::SkipTickets(
    const std::string& address, const v1::SkipTicketsRequest& request,
    absl::Time deadline) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(deadline));
  v1::SkipTicketsResponse response;
  return FromGrpcStatus(
      Stub(address)->SkipTickets(&context, request, &response));
}

}  // namespace shardmap
