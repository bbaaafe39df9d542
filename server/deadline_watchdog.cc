#include "server/deadline_watchdog.h"

namespace shardmap {

DeadlineWatchdog::DeadlineWatchdog(absl::Duration max_sleep)
    : max_sleep_(max_sleep), thread_([this] { Loop(); }) {}

DeadlineWatchdog::~DeadlineWatchdog() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

DeadlineWatchdog::Watch::~Watch() { owner_->End(id_); }

std::unique_ptr<DeadlineWatchdog::Watch> DeadlineWatchdog::Start(
    absl::Time deadline, std::function<void()> on_expire) {
  absl::MutexLock lock(&mu_);
  const uint64_t id = next_id_++;
  entries_[id] = Entry{deadline, std::move(on_expire)};
  if (deadline < wake_at_) ++changes_;
  return std::unique_ptr<Watch>(new Watch(this, id));
}

void DeadlineWatchdog::End(uint64_t id) {
  absl::MutexLock lock(&mu_);
  entries_.erase(id);
}

void DeadlineWatchdog::Loop() {
  absl::MutexLock lock(&mu_);
  while (!stop_) {
    absl::Time next = absl::InfiniteFuture();
    const absl::Time now = absl::Now();
    for (auto it = entries_.begin(); it != entries_.end();) {
      if (it->second.deadline <= now) {
        it->second.on_expire();
        it = entries_.erase(it);
      } else {
        next = std::min(next, it->second.deadline);
        ++it;
      }
    }
    // Wake at the earliest deadline, on a new watch due before then (Start),
    // or on stop; at least every max_sleep_.
    const uint64_t seen = changes_;
    auto changed = [this, seen]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      return stop_ || changes_ != seen;
    };
    wake_at_ = std::min(next, absl::Now() + max_sleep_);
    mu_.AwaitWithDeadline(absl::Condition(&changed), wake_at_);
  }
}

}  // namespace shardmap
