#include "server/grpc_worker_connector.h"

#include <grpcpp/grpcpp.h>

#include <functional>

#include "core/status_util.h"
#include "rpc/channel.h"
#include "rpc/grpc_status.h"
#include "rpc/trace_context.h"

namespace shardmap {
namespace {

// The call starts at the first Write, not in the constructor: starting it
// can block while the connection is made (a stopped worker accepts TCP but
// never answers), and Cancel must already work then.
class GrpcShardChannel final : public ShardChannel {
 public:
  // `unreachable` is called when the call fails with UNAVAILABLE.
  GrpcShardChannel(std::shared_ptr<v1::Worker::Stub> stub, absl::Time deadline,
                   std::function<void()> unreachable)
      : stub_(std::move(stub)), unreachable_(std::move(unreachable)) {
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
    absl::Status s = FromGrpcStatus(stream_->Finish());
    if (s.code() == absl::StatusCode::kUnavailable) unreachable_();
    return s;
  }
  void Cancel() override { context_.TryCancel(); }

 private:
  std::shared_ptr<v1::Worker::Stub> stub_;
  const std::function<void()> unreachable_;
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

void GrpcWorkerConnector::Forget(const std::string& address,
                                 const v1::Worker::Stub* stub) {
  absl::MutexLock lock(&mu_);
  auto it = stubs_.find(address);
  if (it != stubs_.end() && it->second.get() == stub) stubs_.erase(it);
}

std::unique_ptr<ShardChannel> GrpcWorkerConnector::Open(
    const std::string& address, absl::Time deadline) {
  std::shared_ptr<v1::Worker::Stub> stub = Stub(address);
  const v1::Worker::Stub* raw = stub.get();
  return std::make_unique<GrpcShardChannel>(
      std::move(stub), deadline,
      [this, address, raw] { Forget(address, raw); });
}

absl::Status GrpcWorkerConnector::SkipTickets(
    const std::string& address, const v1::SkipTicketsRequest& request,
    absl::Time deadline) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(deadline));
  v1::SkipTicketsResponse response;
  std::shared_ptr<v1::Worker::Stub> stub = Stub(address);
  absl::Status s =
      FromGrpcStatus(stub->SkipTickets(&context, request, &response));
  if (s.code() == absl::StatusCode::kUnavailable) Forget(address, stub.get());
  return s;
}

}  // namespace shardmap
