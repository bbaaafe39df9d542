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

std::unique_ptr<ShardChannel> GrpcWorkerConnector::Open(
    const std::string& address, absl::Time deadline) {
  std::shared_ptr<v1::Worker::Stub> stub;
  {
    absl::MutexLock lock(&mu_);
    auto& slot = stubs_[address];
    if (!slot) slot = v1::Worker::NewStub(MakeChannel(address));
    stub = slot;
  }
  return std::make_unique<GrpcShardChannel>(std::move(stub), deadline);
}

}  // namespace shardmap
