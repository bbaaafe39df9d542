#include "server/job_admission.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace shardmap {

absl::StatusOr<uint64_t> JobAdmission::Submit(
    std::function<void()> start, std::function<void(absl::Status)> refuse) {
  uint64_t ticket;
  {
    absl::MutexLock lock(&mu_);
    ticket = next_ticket_++;
    const bool free_slot =
        options_.max_running <= 0 || running_ < options_.max_running;
    if (!free_slot) {
      if (!closed_.ok()) return closed_;
      if (queue_.size() >=
          static_cast<size_t>(std::max(0, options_.max_queued))) {
        return absl::ResourceExhaustedError(
            absl::StrCat("the coordinator already runs ", running_,
                         " jobs and has ", queue_.size(),
                         " waiting for a turn, its --max-concurrent-jobs and "
                         "--max-queued-jobs limits; retry later"));
      }
      queue_.push_back({ticket, std::move(start), std::move(refuse)});
      ChangedLocked();
      return ticket;
    }
    ++running_;
    ChangedLocked();
  }
  start();
  return ticket;
}

bool JobAdmission::Withdraw(uint64_t ticket) {
  absl::MutexLock lock(&mu_);
  for (auto it = queue_.begin(); it != queue_.end(); ++it) {
    if (it->ticket == ticket) {
      queue_.erase(it);
      ChangedLocked();
      return true;
    }
  }
  return false;
}

void JobAdmission::Done() {
  std::function<void()> next;
  {
    absl::MutexLock lock(&mu_);
    if (queue_.empty()) {
      --running_;
      ChangedLocked();
      return;
    }
    // The slot passes straight to the first in line.
    next = std::move(queue_.front().start);
    queue_.pop_front();
    ChangedLocked();
  }
  next();
}

void JobAdmission::Close(const absl::Status& why) {
  std::deque<Waiting> turned_away;
  {
    absl::MutexLock lock(&mu_);
    if (closed_.ok()) closed_ = why;
    turned_away.swap(queue_);
    ChangedLocked();
  }
  for (Waiting& w : turned_away) w.refuse(why);
}

int JobAdmission::running() {
  absl::MutexLock lock(&mu_);
  return running_;
}

std::pair<int, int> JobAdmission::counts() {
  absl::MutexLock lock(&mu_);
  return {running_, static_cast<int>(queue_.size())};
}

int JobAdmission::queued() {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(queue_.size());
}

void JobAdmission::ChangedLocked() {
  if (options_.on_change) {
    options_.on_change(running_, static_cast<int>(queue_.size()));
  }
}

}  // namespace shardmap
