#include "server/link_call.h"

#include <utility>

#include "rpc/trace_context.h"

namespace shardmap {

LinkCall::LinkCall(ShardLinks* links, std::string address, absl::Time deadline,
                   std::function<std::unique_ptr<ShardChannel>()> fallback,
                   bool wait_for_link)
    : links_(links),
      address_(std::move(address)),
      deadline_(deadline),
      make_fallback_(std::move(fallback)),
      wait_for_link_(wait_for_link) {}

LinkCall::~LinkCall() {
  // A call on the link that was not finished: abandon it there.
  if (started_ && start_status_.ok() && delegate_ == nullptr && !finished_) {
    Cancel();
    static_cast<void>(Finish());
  }
}

bool LinkCall::Start() {
  if (started_) return start_status_.ok();
  started_ = true;
  // A link handed out can be retired (or fail) before the call registers
  // on it; the call then asks again.
  absl::Status why;
  for (int attempt = 0; attempt < 3; ++attempt) {
    absl::StatusOr<std::shared_ptr<ShardLink>> link =
        links_->Acquire(address_, deadline_, cancelled_, wait_for_link_);
    absl::MutexLock lock(&mu_);
    if (!link.ok()) {
      why = link.status();
      break;
    }
    if (*link == nullptr) {
      fallback_ = make_fallback_();
      delegate_ = fallback_.get();
      if (signal_ != nullptr) fallback_->SetReadableSignal(signal_);
      if (cancelled_.load()) fallback_->Cancel();
      return true;
    }
    if (cancelled_.load()) {
      why = absl::CancelledError("the call was cancelled");
      break;
    }
    const uint64_t call = (*link)->NewCall(&inbox_);
    if (call != 0) {
      link_ = *std::move(link);
      call_ = call;
      return true;
    }
    why =
        (*link)->failed()
            ? (*link)->status()
            : absl::UnavailableError("the job link to the worker was replaced");
  }
  start_status_ = why;
  return false;
}

bool LinkCall::Send(const v1::ShardRequest* request, bool writes_done) {
  std::shared_ptr<ShardLink> link;
  v1::ShardLinkRequest message;
  {
    absl::MutexLock lock(&mu_);
    // Cancelled before the worker heard of the call: it never starts there.
    if (cancel_sent_ || (!first_queued_ && cancelled_.load())) return false;
    link = link_;
    message.set_call(call_);
  }
  if (request != nullptr) *message.mutable_request() = *request;
  message.set_writes_done(writes_done);
  if (first_message_) {
    first_message_ = false;
    // Rounded up: the worker's deadline must not pass before ours, or a
    // job that ran out of time would fail with the worker's error before
    // the coordinator knows its own deadline passed.
    message.set_timeout_ms(std::max<int64_t>(
        1, absl::ToInt64Milliseconds(
               absl::Ceil(deadline_ - absl::Now(), absl::Milliseconds(1)))));
    const LogContext& log = CurrentLogContext();
    if (!log.trace_id.empty()) {
      message.set_traceparent(
          Traceparent{log.trace_id, log.span_id}.ToString());
    }
  }
  if (link->Send(std::move(message), deadline_, /*urgent=*/false)) {
    absl::MutexLock lock(&mu_);
    if (!first_queued_) {
      first_queued_ = true;
      // A Cancel while this message waited for room could not go out.
      if (cancelled_.load() && !cancel_sent_) {
        cancel_sent_ = true;
        SendCancelLocked();
      }
    }
    return true;
  }
  // The call cannot go on; say why, as a RunShard stream would.
  inbox_.End(absl::Now() >= deadline_
                 ? absl::DeadlineExceededError(
                       "the call's deadline passed while its messages waited "
                       "for room on the job link")
             : link->failed()
                 ? link->status()
                 : absl::UnavailableError("the job link to the worker broke"));
  return false;
}

bool LinkCall::Write(const v1::ShardRequest& request) {
  if (!Start()) return false;
  if (delegate_ != nullptr) return delegate_->Write(request);
  return Send(&request, false);
}

bool LinkCall::WriteLast(const v1::ShardRequest& request) {
  if (!Start()) return false;
  if (delegate_ != nullptr) return delegate_->WriteLast(request);
  return Send(&request, true);
}

bool LinkCall::WritesDone() {
  if (!started_ || !start_status_.ok()) return false;
  if (delegate_ != nullptr) return delegate_->WritesDone();
  return Send(nullptr, true);
}

bool LinkCall::Read(v1::ShardResponse* response) {
  if (!started_ || !start_status_.ok()) return false;
  if (delegate_ != nullptr) return delegate_->Read(response);
  if (inbox_.Pop(response, deadline_)) return true;
  if (absl::IsDeadlineExceeded(inbox_.status())) Cancel();  // tell the worker
  return false;
}

bool LinkCall::Readable() {
  if (!started_ || !start_status_.ok()) return true;
  if (delegate_ != nullptr) return delegate_->Readable();
  return inbox_.ready() || absl::Now() >= deadline_;
}

bool LinkCall::Complete() {
  if (!started_ || !start_status_.ok()) return true;
  if (delegate_ != nullptr) return delegate_->Complete();
  return inbox_.ended() || absl::Now() >= deadline_;
}

void LinkCall::SetReadableSignal(ChangeSignal* signal) {
  // Before Start: a fallback stream is made only then.
  signal_ = signal;
  inbox_.SetSignal(signal);
}

absl::Status LinkCall::Finish() {
  if (!started_) return absl::CancelledError("the call never started");
  if (!start_status_.ok()) return start_status_;
  if (delegate_ != nullptr) return delegate_->Finish();
  finished_ = true;
  if (!inbox_.ended()) {  // a write failed: the call cannot go on
    inbox_.End(absl::UnavailableError("the job link to the worker broke"));
    Cancel();
  }
  std::shared_ptr<ShardLink> link;
  uint64_t call;
  {
    absl::MutexLock lock(&mu_);
    link = link_;
    call = call_;
  }
  link->EndCall(call);
  return inbox_.status();
}

void LinkCall::Cancel() {
  cancelled_.store(true);
  absl::MutexLock lock(&mu_);
  if (fallback_ != nullptr) {
    fallback_->Cancel();
    return;
  }
  if (link_ == nullptr || call_ == 0 || cancel_sent_) return;
  inbox_.End(absl::CancelledError("the call was cancelled"));
  if (!first_queued_) return;  // Send sends it, or never starts the call
  cancel_sent_ = true;
  SendCancelLocked();
}

void LinkCall::SendCancelLocked() {
  // The worker ignores it if the call has ended there.
  v1::ShardLinkRequest cancel;
  cancel.set_call(call_);
  cancel.set_cancel(true);
  link_->Send(std::move(cancel), absl::InfinitePast(), /*urgent=*/true);
}

}  // namespace shardmap
