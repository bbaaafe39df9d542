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
      if (response_.has_response() && response_.end()) {
        it->second->PushLast(std::move(*response_.mutable_response()),
                             EndStatus(response_));
      } else if (response_.has_response()) {
        it->second->Push(std::move(*response_.mutable_response()));
      } else if (response_.end()) {
        it->second->End(EndStatus(response_));
      }
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
    // A link nobody waited for (Prepare), to a worker that predates links.
    MarkLegacyLocked(address, it->second);
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

void ShardLinks::MarkLegacyLocked(const std::string& address,
                                  const std::shared_ptr<ShardLink>& link) {
  legacy_[address] = absl::Now() + kLegacyRetry;
  if (auto it = links_.find(address);
      it != links_.end() && it->second == link) {
    links_.erase(it);
  }
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
    const std::atomic<bool>& cancelled, bool wait) {
  std::shared_ptr<ShardLink> link;
  std::shared_ptr<ShardLink> retired;
  {
    absl::MutexLock lock(&mu_);
    link = FindOrStartLocked(address, deadline, &retired);
  }
  if (retired != nullptr) retired->Retire();
  if (link == nullptr) return nullptr;
  if (!wait) return link->ready() ? link : nullptr;
  if (link->WaitReady(deadline, cancelled)) return link;
  absl::Status s = link->status();
  if (s.code() == absl::StatusCode::kUnimplemented) {
    absl::MutexLock lock(&mu_);
    MarkLegacyLocked(address, link);
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

}  // namespace shardmap
