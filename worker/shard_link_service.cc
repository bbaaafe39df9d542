#include "worker/shard_link_service.h"

#include <atomic>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"

namespace shardmap {
namespace {

// Bytes of responses queued on a link before a call's Write waits.
constexpr size_t kMaxQueuedBytes = size_t{4} << 20;
// The longest deadline a call may ask for.
constexpr absl::Duration kMaxCallTime = absl::Hours(24);
// How often a call waiting for the coordinator checks for a drain.
constexpr absl::Duration kGatePoll = absl::Milliseconds(100);

}  // namespace

// One call on the link, as the job code sees it.
class ShardLinkReactor::Call final : public ShardStream {
 public:
  Call(ShardLinkReactor* link, uint64_t id, absl::Time deadline,
       std::string trace)
      : link_(link), id_(id), deadline_(deadline), trace_(std::move(trace)) {}

  uint64_t id() const { return id_; }
  absl::Time deadline() const { return deadline_; }
  const std::string& trace() const { return trace_; }
  MuxInbox<v1::ShardRequest>& inbox() { return inbox_; }
  void Cancel() {
    cancelled_.store(true);
    inbox_.End(absl::CancelledError("the coordinator cancelled the call"),
               /*drop=*/true);
  }

  bool Read(v1::ShardRequest* request) override {
    // Wakes now and then to notice a drain: the gate cannot cancel a call
    // on a link the way it cancels a RunShard call.
    for (;;) {
      const absl::Time until = std::min(deadline_, absl::Now() + kGatePoll);
      if (inbox_.Pop(request, until, /*end_at_deadline=*/until >= deadline_)) {
        return true;
      }
      if (inbox_.ended()) return false;
      if (cancelled()) {
        inbox_.End(absl::CancelledError("the worker is shutting down"),
                   /*drop=*/true);
        return false;
      }
    }
  }
  bool Write(const v1::ShardResponse& response) override {
    v1::ShardLinkResponse message;
    message.set_call(id_);
    *message.mutable_response() = response;
    return link_->outbox_.Send(std::move(message), response.ByteSizeLong(),
                               deadline_);
  }
  bool WriteLast(const v1::ShardResponse& response) override {
    last_ = response;  // leaves with the call's status
    return !cancelled();
  }
  bool cancelled() const override {
    return cancelled_.load() || absl::Now() >= deadline_ ||
           (link_->gate_ != nullptr && link_->gate_->cancelled());
  }

  // The call's last message: the response WriteLast held, and `status`.
  v1::ShardLinkResponse End(const absl::Status& status) {
    v1::ShardLinkResponse message;
    message.set_call(id_);
    if (last_.has_value()) *message.mutable_response() = *std::move(last_);
    message.set_end(true);
    message.set_code(static_cast<int32_t>(status.code()));
    message.set_message(std::string(status.message()));
    return message;
  }

 private:
  ShardLinkReactor* const link_;
  const uint64_t id_;
  const absl::Time deadline_;
  const std::string trace_;
  std::atomic<bool> cancelled_{false};
  MuxInbox<v1::ShardRequest> inbox_;
  std::optional<v1::ShardResponse> last_;  // the call's thread only
};

ShardLinkReactor::ShardLinkReactor(DeviceThreads* threads, DrainGate* gate,
                                   RunCall run, InlinePolicy runs_inline)
    : threads_(threads),
      gate_(gate),
      run_(std::move(run)),
      runs_inline_(std::move(runs_inline)),
      outbox_(kMaxQueuedBytes,
              [this](const v1::ShardLinkResponse* m) { StartWrite(m); }) {
  outbox_.Send(v1::ShardLinkResponse(), 0, absl::InfinitePast(),
               /*urgent=*/true);  // call 0: this worker serves links
  StartRead(&request_);
}

void ShardLinkReactor::OnReadDone(bool ok) {
  if (!ok) {  // the coordinator closed or cancelled the link
    bool finish;
    {
      absl::MutexLock lock(&mu_);
      reading_done_ = true;
      for (auto& [id, call] : calls_) call->Cancel();
      finish = ClaimFinishLocked();
    }
    if (finish) FinishStream();
    return;
  }
  // Asked before the lock (it takes locks of its own), of any message that
  // can start a call and carries all of it.
  const bool run_inline = runs_inline_ != nullptr && request_.writes_done() &&
                          !request_.cancel() && request_.has_request() &&
                          request_.request().has_job() &&
                          runs_inline_(request_.request());
  std::shared_ptr<Call> inline_call;
  {
    absl::MutexLock lock(&mu_);
    const uint64_t id = request_.call();
    auto it = calls_.find(id);
    if (it == calls_.end()) {
      // A new call starts with its job header; anything else names a call
      // that has ended here (a late cancel) and is dropped.
      if (id != 0 && request_.has_request() && request_.request().has_job() &&
          !request_.cancel()) {
        inline_call = StartCall(id, request_, run_inline);
      }
    } else if (request_.cancel()) {
      it->second->Cancel();
    } else {
      if (request_.has_request()) {
        it->second->inbox().Push(std::move(*request_.mutable_request()));
      }
      if (request_.writes_done()) it->second->inbox().End(absl::OkStatus());
    }
  }
  // Reading stays off meanwhile, so this thread cannot claim the finish
  // (reading is not done), and the reactor outlives the call.
  if (inline_call != nullptr) RunOne(inline_call);
  request_.Clear();
  StartRead(&request_);
}

std::shared_ptr<ShardLinkReactor::Call> ShardLinkReactor::StartCall(
    uint64_t id, v1::ShardLinkRequest& first, bool run_inline) {
  if (first.timeout_ms() <= 0) {
    Call refused(this, id, absl::InfinitePast(), "");
    outbox_.Send(refused.End(absl::InvalidArgumentError(
                     "ShardLinkRequest.timeout_ms must be positive on a "
                     "call's first message")),
                 0, absl::InfinitePast(), /*urgent=*/true);
    return nullptr;
  }
  const absl::Duration timeout =
      std::min(absl::Milliseconds(first.timeout_ms()), kMaxCallTime);
  auto call = std::make_shared<Call>(this, id, absl::Now() + timeout,
                                     first.traceparent());
  call->inbox().Push(std::move(*first.mutable_request()));
  if (first.writes_done()) call->inbox().End(absl::OkStatus());
  calls_[id] = call;
  if (run_inline) return call;
  threads_->Run([this, call] { RunOne(call); });
  return nullptr;
}

void ShardLinkReactor::RunOne(const std::shared_ptr<Call>& call) {
  absl::Status status = run_(call.get(), call->deadline(), call->trace());
  // As gRPC ends a RunShard call whose deadline passed.
  if (!status.ok() && absl::Now() >= call->deadline()) {
    status = absl::DeadlineExceededError(absl::StrCat(
        "the call's deadline passed on the worker (", status.message(), ")"));
  }
  // Never held back: the end must reach the coordinator even when the
  // call's own responses filled the queue.
  outbox_.Send(call->End(status), 0, absl::InfinitePast(), /*urgent=*/true);
  bool finish;
  {
    absl::MutexLock lock(&mu_);
    calls_.erase(call->id());
    finish = ClaimFinishLocked();
  }
  // Unless this thread claimed the finish, the reactor may be gone now.
  if (finish) FinishStream();
}

bool ShardLinkReactor::ClaimFinishLocked() {
  if (!reading_done_ || !calls_.empty() || finishing_) return false;
  finishing_ = true;
  return true;
}

void ShardLinkReactor::FinishStream() {
  // After the last write: Finish may not overtake a write in flight.
  outbox_.Close([this] { Finish(grpc::Status::OK); }, /*keep_queued=*/true);
}

}  // namespace shardmap
