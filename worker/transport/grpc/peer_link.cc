#include "worker/transport/grpc/peer_link.h"

#include "absl/strings/str_cat.h"
#include "worker/metrics/worker_metrics.h"
#include "worker/transport/grpc/peer_frame.h"

namespace shardmap {
namespace {
constexpr absl::Duration kAbortPoll = absl::Milliseconds(20);
}  // namespace

PeerLink::PeerLink(const std::string& peer_address)
    : peer_address_(peer_address) {}

std::shared_ptr<PeerLink> PeerLink::Open(grpc::GenericStub* stub,
                                         const std::string& peer_address,
                                         const std::string& my_address,
                                         uint64_t incarnation) {
  std::shared_ptr<PeerLink> link(new PeerLink(peer_address));
  // The first frame only introduces the sender.
  v1::PeerFrame hello;
  hello.set_from_address(my_address);
  hello.set_incarnation(incarnation);
  {
    absl::MutexLock lock(&link->mu_);
    link->self_ = link;
    bool start;
    link->EnqueueLocked(EncodeFrame(hello, grpc::Slice()), &start);
  }
  // The stream lives as long as the worker: its messages are bounded one
  // by one (Send's deadline, the receiver's timeouts), not as a whole.
  stub->PrepareBidiStreamingCall(&link->context_, kPeerExchangeMethod,
                                 grpc::StubOptions(), link.get());
  // Writes start outside reactions, so hold the reactor open until
  // Shutdown or a break.
  link->AddHold();
  link->StartWrite(&link->in_flight_);
  link->StartRead(&link->ack_);
  link->StartCall();
  return link;
}

absl::Status PeerLink::Send(const v1::PeerFrame& header, grpc::Slice payload,
                            absl::Time deadline,
                            const std::function<absl::Status()>& aborted) {
  // Encoded before the lock; at most one fragment per sender is held
  // outside the bounded queue.
  const size_t payload_bytes = payload.size();
  grpc::ByteBuffer frame = EncodeFrame(header, std::move(payload));
  const size_t bytes = frame.Length();
  bool start = false;
  {
    absl::MutexLock lock(&mu_);
    while (broken_.ok() && queued_bytes_ > 0 &&
           queued_bytes_ + bytes > kMaxQueuedBytes) {
      if (absl::Status s = aborted(); !s.ok()) return s;
      const absl::Time now = absl::Now();
      if (now >= deadline) {
        return absl::DeadlineExceededError(
            absl::StrCat("timed out sending to worker ", peer_address_,
                         ": it is not reading (stopped, or overloaded)"));
      }
      auto room = [this, bytes]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !broken_.ok() || queued_bytes_ + bytes <= kMaxQueuedBytes;
      };
      mu_.AwaitWithDeadline(absl::Condition(&room),
                            std::min(deadline, now + kAbortPoll));
    }
    if (!broken_.ok()) return broken_;
    EnqueueLocked(std::move(frame), &start);
  }
  worker_metrics::PeerBytesSent(peer_address_, payload_bytes);
  if (start) StartWrite(&in_flight_);
  return absl::OkStatus();
}

void PeerLink::EnqueueLocked(grpc::ByteBuffer frame, bool* start) {
  queued_bytes_ += frame.Length();
  *start = !writing_;
  if (!writing_) {
    writing_ = true;
    in_flight_ = std::move(frame);
  } else {
    queue_.push_back(std::move(frame));
  }
}

void PeerLink::OnWriteDone(bool ok) {
  bool next = false;
  bool release = false;
  {
    absl::MutexLock lock(&mu_);
    queued_bytes_ -= in_flight_.Length();
    if (ok) ++writes_done_;
    // gRPC is done with the frame: drop it now, so lent memory is released
    // without waiting for the next write.
    in_flight_.Clear();
    if (!ok) {
      writing_ = false;
      release = BreakLocked(absl::UnavailableError(
          absl::StrCat("the stream to worker ", peer_address_, " broke")));
    }
  }
  if (!ok) {
    if (release) RemoveHold();
    return;
  }
  {
    absl::MutexLock lock(&mu_);
    if (!queue_.empty() && broken_.ok()) {
      in_flight_ = std::move(queue_.front());
      queue_.pop_front();
      next = true;
    } else {
      writing_ = false;
    }
  }
  if (next) StartWrite(&in_flight_);
}

void PeerLink::OnReadDone(bool ok) {
  if (ok) {
    StartRead(&ack_);
    return;
  }
  bool release;
  {
    absl::MutexLock lock(&mu_);
    release = BreakLocked(absl::UnavailableError(
        absl::StrCat("worker ", peer_address_, " closed its peer stream")));
  }
  if (release) RemoveHold();
}

void PeerLink::OnDone(const grpc::Status& status) {
  // `keep` may hold the last reference to this link: it is destroyed at the
  // end of this function, after the lock is released.
  std::shared_ptr<PeerLink> keep;
  absl::MutexLock lock(&mu_);
  BreakLocked(absl::UnavailableError(
      absl::StrCat("the stream to worker ", peer_address_,
                   " ended: ", status.error_message())));
  keep = std::move(self_);
}

bool PeerLink::broken() const {
  absl::MutexLock lock(&mu_);
  return !broken_.ok();
}

uint64_t PeerLink::writes_done() const {
  absl::MutexLock lock(&mu_);
  return writes_done_;
}

bool PeerLink::pending() const {
  absl::MutexLock lock(&mu_);
  return writing_ || !queue_.empty();
}

void PeerLink::Shutdown() {
  bool release;
  {
    absl::MutexLock lock(&mu_);
    release =
        BreakLocked(absl::UnavailableError("the peer link was shut down"));
  }
  context_.TryCancel();
  if (release) RemoveHold();
}

bool PeerLink::BreakLocked(absl::Status why) {
  if (broken_.ok()) broken_ = std::move(why);
  for (const grpc::ByteBuffer& f : queue_) queued_bytes_ -= f.Length();
  queue_.clear();
  // RemoveHold may finish the stream; the caller calls it after unlocking.
  if (hold_released_) return false;
  hold_released_ = true;
  return true;
}

}  // namespace shardmap
