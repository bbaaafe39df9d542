#include "server/shard_link.h"

#include <utility>

#include "rpc/grpc_status.h"
#include "rpc/trace_context.h"

namespace shardmap {
namespace {

// How long a link lives, and how much of it must be left for a call to
// start on it; a call due later uses RunShard.
constexpr absl::Duration kLinkLife = absl::Hours(1);
constexpr absl::Duration kLinkMargin = absl::Minutes(1);
// How long to use RunShard after a worker said it serves no links.
constexpr absl::Duration kLegacyRetry = absl::Minutes(1);
// Bytes queued on a link before its senders wait.
constexpr size_t kMaxQueuedBytes = size_t{4} << 20;
// How often waits for a link check their caller's cancellation.
constexpr absl::Duration kCancelPoll = absl::Milliseconds(20);

absl::Status EndStatus(const v1::ShardLinkResponse& r) {
  return absl::Status(static_cast<absl::StatusCode>(r.code()), r.message());
}

}  // namespace

ShardLink::ShardLink(absl::Time expires,
                     std::function<void(const absl::Status&)> ended)
    : expires_(expires),
      ended_(std::move(ended)),
      outbox_(kMaxQueuedBytes,
              [this](const v1::ShardLinkRequest* m) { StartWrite(m); }) {}

std::shared_ptr<ShardLink> ShardLink::Start(
    v1::Worker::Stub* stub, absl::Time expires,
    std::function<void(const absl::Status&)> ended) {
  std::shared_ptr<ShardLink> link(new ShardLink(expires, std::move(ended)));
  link->self_ = link;
  link->context_.set_deadline(absl::ToChronoTime(expires));
  stub->async()->RunShards(&link->context_, link.get());
  // Held until the outbox can write no more, so OnDone cannot come while
  // a sender may still start a write.
  link->AddHold();
  link->StartRead(&link->response_);
  link->StartCall();
  return link;
}

bool ShardLink::WaitReady(absl::Time deadline,
                          const std::atomic<bool>& cancelled) {
  auto settled = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return ready_ || failed_;
  };
  absl::MutexLock lock(&mu_);
  while (!settled() && !cancelled.load() && absl::Now() < deadline) {
    mu_.AwaitWithDeadline(absl::Condition(&settled),
                          std::min(deadline, absl::Now() + kCancelPoll));
  }
  return ready_ && !failed_;
}

bool ShardLink::ready() {
  absl::MutexLock lock(&mu_);
  return ready_ && !failed_;
}

absl::Status ShardLink::status() {
  absl::MutexLock lock(&mu_);
  return status_;
}

bool ShardLink::failed() {
  absl::MutexLock lock(&mu_);
  return failed_;
}

uint64_t ShardLink::NewCall(MuxInbox<v1::ShardResponse>* inbox) {
  absl::MutexLock lock(&mu_);
  if (failed_ || retired_) return 0;
  const uint64_t call = next_call_++;
  calls_[call] = inbox;
  return call;
}

void ShardLink::EndCall(uint64_t call) {
  bool cancel = false;
  {
    absl::MutexLock lock(&mu_);
    calls_.erase(call);
    cancel = retired_ && calls_.empty();
  }
  if (cancel) Cancel();
}

bool ShardLink::Send(v1::ShardLinkRequest message, absl::Time deadline,
                     bool urgent) {
  const size_t bytes = message.ByteSizeLong();
  return outbox_.Send(std::move(message), bytes, deadline, urgent);
}

void ShardLink::Retire() {
  bool cancel = false;
  {
    absl::MutexLock lock(&mu_);
    retired_ = true;
    cancel = calls_.empty();
  }
  if (cancel) Cancel();
}

void ShardLink::OnReadDone(bool ok) {
  if (!ok) {  // the stream is over; OnDone tells why
    // Once nothing is being written, nothing will be: the hold can go.
    outbox_.Close([this] { RemoveHold(); });
    return;
  }
  {
    absl::MutexLock lock(&mu_);
    if (response_.call() == 0) {
      ready_ = true;
    } else if (auto it = calls_.find(response_.call()); it != calls_.end()) {
      if (response_.has_response()) {
        it->second->Push(std::move(*response_.mutable_response()));
      }
      if (response_.end()) it->second->End(EndStatus(response_));
    }
  }
  response_.Clear();
  StartRead(&response_);
}

void ShardLink::OnDone(const grpc::Status& status) {
  absl::Status s = FromGrpcStatus(status);
  if (s.ok()) s = absl::UnavailableError("the worker ended its link");
  {
    absl::MutexLock lock(&mu_);
    failed_ = true;
    status_ = s;
    for (auto& [call, inbox] : calls_) inbox->End(s);
  }
  outbox_.Close();
  ended_(s);
  std::shared_ptr<ShardLink> keep = std::move(self_);
  done_.Notify();
}

ShardLinks::~ShardLinks() {
  std::vector<std::shared_ptr<ShardLink>> links;
  {
    absl::MutexLock lock(&mu_);
    links.swap(started_);
    links_.clear();
  }
  for (auto& link : links) link->Cancel();
  // Bounded; gRPC ends a cancelled stream at once. A link must not end
  // after the ChannelCache its `ended` reports to.
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  for (auto& link : links) link->WaitDone(deadline);
}

bool ShardLinks::Ready(const std::string& address, absl::Time deadline) {
  std::shared_ptr<ShardLink> link;
  {
    absl::MutexLock lock(&mu_);
    if (legacy_.count(address) > 0) return false;
    auto it = links_.find(address);
    if (it == links_.end()) return false;
    link = it->second;
  }
  return link->expires() - kLinkMargin >= deadline && link->ready();
}

std::shared_ptr<ShardLink> ShardLinks::FindOrStartLocked(
    const std::string& address, absl::Time deadline,
    std::shared_ptr<ShardLink>* retired) {
  const absl::Time now = absl::Now();
  if (auto it = legacy_.find(address); it != legacy_.end()) {
    if (now < it->second) return nullptr;
    legacy_.erase(it);
  }
  if (deadline > now + kLinkLife - kLinkMargin) return nullptr;
  auto it = links_.find(address);
  if (it != links_.end() && it->second->failed() &&
      it->second->status().code() == absl::StatusCode::kUnimplemented) {
    // A link Prepare made, to a worker that predates links.
    legacy_[address] = now + kLegacyRetry;
    links_.erase(it);
    return nullptr;
  }
  if (it != links_.end() && (it->second->failed() ||
                             it->second->expires() - kLinkMargin < deadline)) {
    *retired = std::move(it->second);
    links_.erase(it);
    it = links_.end();
  }
  if (it != links_.end()) return it->second;
  std::shared_ptr<grpc::Channel> channel;
  std::shared_ptr<v1::Worker::Stub> stub =
      channels_->Stub<v1::Worker>(address, &channel);
  std::shared_ptr<ShardLink> link = ShardLink::Start(
      stub.get(), now + kLinkLife,
      [channels = channels_, address, channel](const absl::Status& s) {
        channels->OnCallEnded(address, channel, s);
      });
  links_[address] = link;
  // Forget links that are done.
  std::vector<std::shared_ptr<ShardLink>> live;
  for (auto& l : started_) {
    if (!l->WaitDone(absl::InfinitePast())) live.push_back(std::move(l));
  }
  live.push_back(link);
  started_.swap(live);
  return link;
}

void ShardLinks::Prepare(const std::string& address, absl::Time deadline) {
  std::shared_ptr<ShardLink> retired;
  {
    absl::MutexLock lock(&mu_);
    FindOrStartLocked(address, deadline, &retired);
  }
  if (retired != nullptr) retired->Retire();
}

absl::StatusOr<std::shared_ptr<ShardLink>> ShardLinks::Acquire(
    const std::string& address, absl::Time deadline,
    const std::atomic<bool>& cancelled) {
  std::shared_ptr<ShardLink> link;
  std::shared_ptr<ShardLink> retired;
  {
    absl::MutexLock lock(&mu_);
    link = FindOrStartLocked(address, deadline, &retired);
  }
  if (retired != nullptr) retired->Retire();
  if (link == nullptr) return nullptr;
  if (link->WaitReady(deadline, cancelled)) return link;
  absl::Status s = link->status();
  if (s.code() == absl::StatusCode::kUnimplemented) {
    absl::MutexLock lock(&mu_);
    legacy_[address] = absl::Now() + kLegacyRetry;
    if (auto it = links_.find(address);
        it != links_.end() && it->second == link) {
      links_.erase(it);
    }
    return nullptr;
  }
  if (cancelled.load()) return absl::CancelledError("the call was cancelled");
  if (s.ok()) {
    s = absl::DeadlineExceededError(
        "the worker did not answer on its job link before the job's "
        "deadline");
  }
  return s;
}

LinkCall::LinkCall(ShardLinks* links, std::string address, absl::Time deadline,
                   std::function<std::unique_ptr<ShardChannel>()> fallback)
    : links_(links),
      address_(std::move(address)),
      deadline_(deadline),
      make_fallback_(std::move(fallback)) {}

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
        links_->Acquire(address_, deadline_, cancelled_);
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
