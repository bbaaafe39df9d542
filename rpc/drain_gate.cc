#include "rpc/drain_gate.h"

#include "absl/strings/str_cat.h"

namespace shardmap {

DrainGate::Pass::~Pass() { gate_->Leave(context_); }

absl::StatusOr<std::unique_ptr<DrainGate::Pass>> DrainGate::Enter(
    grpc::ServerContextBase* context) {
  absl::MutexLock lock(&mu_);
  // Checked under the lock, so StartDrain + WaitIdle never miss a call.
  if (draining_.load()) {
    return absl::UnavailableError(absl::StrCat(
        what_,
        " is shutting down and takes no new jobs; retry on another "
        "or after it restarts"));
  }
  ++in_flight_;
  if (context != nullptr) contexts_.insert(context);
  return std::unique_ptr<Pass>(new Pass(this, context));
}

void DrainGate::Leave(grpc::ServerContextBase* context) {
  absl::MutexLock lock(&mu_);
  --in_flight_;
  if (context != nullptr) contexts_.erase(contexts_.find(context));
}

void DrainGate::StartDrain() {
  absl::MutexLock lock(&mu_);
  draining_ = true;
}

bool DrainGate::WaitIdle(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return in_flight_ == 0;
  };
  return mu_.AwaitWithDeadline(absl::Condition(&idle), deadline);
}

int64_t DrainGate::Drain(absl::Duration grace, absl::Duration settle) {
  StartDrain();
  if (WaitIdle(absl::Now() + grace)) return 0;
  const int64_t left = in_flight();
  Cancel();
  if (WaitIdle(absl::Now() + settle)) return left;
  CancelCalls();
  WaitIdle(absl::Now() + settle);
  return left;
}

void DrainGate::CancelCalls() {
  absl::MutexLock lock(&mu_);
  cancelled_ = true;
  for (grpc::ServerContextBase* c : contexts_) c->TryCancel();
}

int64_t DrainGate::in_flight() const {
  absl::MutexLock lock(&mu_);
  return in_flight_;
}

}  // namespace shardmap
