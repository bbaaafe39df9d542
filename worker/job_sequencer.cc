#include "worker/job_sequencer.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace shardmap {
namespace {
// How often a waiting job looks at its cancellation.
constexpr absl::Duration kPoll = absl::Milliseconds(20);
// Bounds on what is kept of ids other than the current one.
constexpr size_t kRetiredIds = 64;
constexpr size_t kEarlyIds = 8;
constexpr size_t kEarlySkipsPerId = 1 << 16;
}  // namespace

bool JobSequencer::RetiredLocked(const std::string& worker_id) const {
  return std::find(retired_.begin(), retired_.end(), worker_id) !=
         retired_.end();
}

bool JobSequencer::AdoptLocked(const std::string& worker_id) {
  if (worker_id == worker_id_) return true;
  if (RetiredLocked(worker_id)) return false;
  spdlog::info("job order restarts for worker id {}", worker_id);
  if (!worker_id_.empty()) {
    retired_.push_back(worker_id_);
    if (retired_.size() > kRetiredIds) retired_.pop_front();
  }
  worker_id_ = worker_id;
  next_ = 0;
  running_ = false;
  done_.clear();
  for (auto it = early_skips_.begin(); it != early_skips_.end(); ++it) {
    if (it->first != worker_id) continue;
    for (uint64_t t : it->second) done_[t] = true;
    early_skips_.erase(it);
    break;
  }
  AdvanceLocked();
  return true;
}

void JobSequencer::AdvanceLocked() {
  for (auto it = done_.begin(); it != done_.end() && it->first == next_;
       it = done_.erase(it)) {
    ++next_;
  }
}

absl::Status JobSequencer::Enter(const std::string& worker_id, uint64_t ticket,
                                 absl::Time deadline,
                                 const std::function<bool()>& cancelled) {
  absl::MutexLock lock(&mu_);
  if (!AdoptLocked(worker_id)) {
    return absl::AbortedError(
        absl::StrCat("job ticket ", ticket, " is of worker id ", worker_id,
                     ", but the worker has registered again since (now ",
                     worker_id_, "); the job was planned before that"));
  }
  auto skipped = [this, ticket]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = done_.find(ticket);
    return it != done_.end() && it->second;
  };
  if (ticket < next_ || (ticket == next_ && running_) || skipped()) {
    return absl::AbortedError(absl::StrCat(
        "job ticket ", ticket,
        " arrived after its turn had passed: the coordinator had given the "
        "job up (it failed before reaching this worker), or the ticket was "
        "used already"));
  }
  while (true) {
    if (worker_id_ != worker_id) {
      // The worker registered again while this job waited: its ticket
      // belongs to the old order, not the new one.
      return absl::AbortedError(absl::StrCat(
          "job ticket ", ticket, " of worker id ", worker_id,
          " was waiting its turn when the worker registered again as ",
          worker_id_));
    }
    if (skipped()) {
      return absl::AbortedError(
          absl::StrCat("the coordinator gave up the job of ticket ", ticket,
                       " while it waited its turn on this worker"));
    }
    if (next_ == ticket && !running_) break;
    // A job that gives up waiting leaves its ticket behind as done, so
    // the jobs after it do not wait for it.
    auto give_up = [&](absl::Status why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      done_.emplace(ticket, false);
      AdvanceLocked();
      return why;
    };
    if (cancelled()) {
      return give_up(
          absl::CancelledError("the job was cancelled while waiting its turn"));
    }
    const absl::Time now = absl::Now();
    if (now >= deadline) {
      return give_up(absl::DeadlineExceededError(
          absl::StrCat("the job's deadline passed while it waited for ",
                       ticket - next_, " earlier job(s) on this worker")));
    }
    auto wake = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return (next_ == ticket && !running_) || worker_id_ != worker_id ||
             skipped();
    };
    mu_.AwaitWithDeadline(absl::Condition(&wake),
                          std::min(deadline, now + kPoll));
  }
  running_ = true;
  return absl::OkStatus();
}

bool JobSequencer::TurnIsNow(const std::string& worker_id, uint64_t ticket) {
  absl::MutexLock lock(&mu_);
  return worker_id == worker_id_ && ticket == next_ && !running_;
}

void JobSequencer::Leave(const std::string& worker_id, uint64_t ticket) {
  absl::MutexLock lock(&mu_);
  if (worker_id != worker_id_) return;  // the order restarted meanwhile
  if (next_ != ticket || !running_) return;
  running_ = false;
  ++next_;
  AdvanceLocked();
}

void JobSequencer::Skip(const std::string& worker_id, uint64_t ticket) {
  absl::MutexLock lock(&mu_);
  if (worker_id != worker_id_) {
    if (RetiredLocked(worker_id)) return;  // moot
    // An id whose first job has not arrived yet: keep the skip for it.
    auto it = std::find_if(early_skips_.begin(), early_skips_.end(),
                           [&](const auto& e) { return e.first == worker_id; });
    if (it == early_skips_.end()) {
      early_skips_.emplace_back(worker_id, std::set<uint64_t>());
      if (early_skips_.size() > kEarlyIds) early_skips_.pop_front();
      it = std::prev(early_skips_.end());
    }
    if (it->second.size() < kEarlySkipsPerId) {
      it->second.insert(ticket);
    } else {
      // Its job then waits for the ticket until its own deadline.
      spdlog::warn(
          "skip of ticket {} for worker id {} not kept: {} skips already "
          "wait for that id's first job",
          ticket, worker_id, kEarlySkipsPerId);
    }
    return;
  }
  if (ticket < next_ || (ticket == next_ && running_)) return;
  done_[ticket] = true;
  AdvanceLocked();
}

}  // namespace shardmap
