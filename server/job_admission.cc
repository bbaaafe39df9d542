#include "server/job_admission.h"

#include "absl/strings/str_cat.h"

namespace shardmap {

absl::StatusOr<uint64_t> JobAdmission::Submit(std::function<void()> start) {
  uint64_t ticket;
  {
    absl::MutexLock lock(&mu_);
    ticket = next_ticket_++;
    const bool free_slot =
        options_.max_running <= 0 || running_ < options_.max_running;
    if (!free_slot) {
      if (queue_.size() >= static_cast<size_t>(options_.max_queued)) {
        return absl::ResourceExhaustedError(
            absl::StrCat("the coordinator already runs ", running_,
                         " jobs and has ", queue_.size(),
                         " waiting for a turn, its --max-concurrent-jobs and "
                         "--max-queued-jobs limits; retry later"));
      }
      queue_.emplace_back(ticket, std::move(start));
      return ticket;
    }
    ++running_;
  }
  start();
  return ticket;
}

bool JobAdmission::Withdraw(uint64_t ticket) {
  absl::MutexLock lock(&mu_);
  for (auto it = queue_.begin(); it != queue_.end(); ++it) {
    if (it->first == ticket) {
      queue_.erase(it);
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
      return;
    }
    // The slot passes straight to the first in line.
    next = std::move(queue_.front().second);
    queue_.pop_front();
  }
  next();
}

int JobAdmission::running() {
  absl::MutexLock lock(&mu_);
  return running_;
}

int JobAdmission::queued() {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(queue_.size());
}

}  // namespace shardmap
