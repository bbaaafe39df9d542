#include "worker/transport/grpc/peer_service.h"

#include "absl/synchronization/mutex.h"
#include "core/status_util.h"
#include "rpc/grpc_status.h"
#include "worker/metrics/worker_metrics.h"

namespace shardmap {
namespace {

// Reads frames until the sender closes or is lost. Reactions never block:
// Deliver only files the frame's slices in the inbox.
class InboundStream final : public grpc::ServerGenericBidiReactor {
 public:
  explicit InboundStream(PeerInbox* inbox) : inbox_(inbox) {
    StartRead(&frame_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      // The sender closed its side, or its process went away.
      MarkLost();
      Finish(grpc::Status::OK);
      return;
    }
    absl::StatusOr<DecodedFrame> frame = DecodeFrame(frame_);
    frame_.Clear();
    if (!frame.ok()) {
      Finish(ToGrpcStatus(frame.status()));
      return;
    }
    {
      absl::MutexLock lock(&mu_);
      if (from_.empty()) {
        from_ = frame->header.from_address();
        if (from_.empty()) {
          Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                              "the first peer frame must name its sender "
                              "(from_address)"));
          return;
        }
        incarnation_ = frame->header.incarnation();
        inbox_->StreamOpened(from_, incarnation_);
      }
      worker_metrics::PeerBytesReceived(from_, frame->payload.size());
    }
    // A frame of no job only introduces its sender.
    if (!frame->header.job_id().empty()) {
      absl::Status s = inbox_->Deliver(*std::move(frame));
      if (!s.ok()) {
        Finish(ToGrpcStatus(s));
        return;
      }
    }
    StartRead(&frame_);
  }

  // May run concurrently with OnReadDone.
  void OnCancel() override { MarkLost(); }

  void OnDone() override { delete this; }

 private:
  void MarkLost() {
    absl::MutexLock lock(&mu_);
    if (!from_.empty() && !closed_) inbox_->StreamLost(from_, incarnation_);
    closed_ = true;
  }

  PeerInbox* const inbox_;  // Not owned.
  grpc::ByteBuffer frame_;
  absl::Mutex mu_;
  // The sender's address, from its first frame.
  std::string from_ ABSL_GUARDED_BY(mu_);
  uint64_t incarnation_ ABSL_GUARDED_BY(mu_) = 0;  // the sender's process
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace

grpc::ServerGenericBidiReactor* PeerService::CreateReactor(
    grpc::GenericCallbackServerContext* context) {
  if (context->method() != kPeerExchangeMethod) {
    // What the base class answers for every method.
    return grpc::CallbackGenericService::CreateReactor(context);
  }
  return new InboundStream(inbox_);
}

}  // namespace shardmap
