#include "worker/peer_service.h"

#include "absl/synchronization/mutex.h"
#include "core/status_util.h"

namespace shardmap {
namespace {

// Reads frames until the sender closes or is lost. Reactions never block:
// Deliver only copies the frame into the inbox.
class InboundStream final
    : public grpc::ServerBidiReactor<v1::PeerFrame, v1::PeerAck> {
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
    {
      absl::MutexLock lock(&mu_);
      if (from_.empty()) {
        from_ = frame_.from_address();
        inbox_->StreamOpened(from_);
      }
    }
    absl::Status s = inbox_->Deliver(std::move(frame_));
    if (!s.ok()) {
      Finish(ToGrpcStatus(s));
      return;
    }
    frame_.Clear();
    StartRead(&frame_);
  }

  // May run concurrently with OnReadDone.
  void OnCancel() override { MarkLost(); }

  void OnDone() override { delete this; }

 private:
  void MarkLost() {
    absl::MutexLock lock(&mu_);
    if (!from_.empty() && !closed_) inbox_->StreamLost(from_);
    closed_ = true;
  }

  PeerInbox* const inbox_;  // Not owned.
  v1::PeerFrame frame_;
  absl::Mutex mu_;
  // The sender's address, from its first frame.
  std::string from_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace

grpc::ServerBidiReactor<v1::PeerFrame, v1::PeerAck>* PeerService::Exchange(
    grpc::CallbackServerContext* context) {
  return new InboundStream(inbox_);
}

}  // namespace shardmap
