#include "worker/job_sequencer.h"

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"

namespace shardmap {
namespace {
constexpr absl::Duration kPoll = absl::Milliseconds(20);
}  // namespace

absl::Status JobSequencer::Enter(const std::string& worker_id, uint64_t ticket,
                                 absl::Time deadline,
                                 const std::function<bool()>& cancelled) {
  absl::MutexLock lock(&mu_);
  if (worker_id != worker_id_) {
    spdlog::info("job order restarts for worker id {}", worker_id);
    worker_id_ = worker_id;
    next_ = 0;
    arrived_.clear();
    abandoned_.clear();
    last_progress_ = absl::Now();
  }
  if (ticket < next_) {
    return absl::AbortedError(
        absl::StrCat("job ticket ", ticket,
                     " arrived after its turn had passed (the "
                     "worker waited ",
                     absl::FormatDuration(options_.gap_timeout),
                     " for it and went on); the job was already failing"));
  }
  arrived_.insert(ticket);
  while (true) {
    if (worker_id_ != worker_id) {
      // The worker registered again while this job waited: its ticket
      // belongs to the old order, not the new one.
      return absl::AbortedError(absl::StrCat(
          "job ticket ", ticket, " of worker id ", worker_id,
          " was waiting its turn when the worker registered again as ",
          worker_id_));
    }
    if (next_ == ticket) break;
    const absl::Time now = absl::Now();
    // A job that gives up waiting leaves its ticket behind as done, so
    // the jobs after it do not wait for it.
    if (cancelled()) {
      arrived_.erase(ticket);
      abandoned_.insert(ticket);
      return absl::CancelledError(
          "the job was cancelled while waiting its turn");
    }
    if (now >= deadline) {
      arrived_.erase(ticket);
      abandoned_.insert(ticket);
      return absl::DeadlineExceededError(
          absl::StrCat("the job's deadline passed while it waited for ",
                       ticket - next_, " earlier job(s) on this worker"));
    }
    if (abandoned_.count(next_) > 0) {
      abandoned_.erase(next_);
      ++next_;
      last_progress_ = now;
      continue;
    }
    if (arrived_.count(next_) == 0 &&
        now - last_progress_ > options_.gap_timeout) {
      // Every ticket before the earliest one here never came (their jobs
      // failed before reaching this worker): skip them all at once.
      const uint64_t first = *arrived_.begin();
      spdlog::warn("job tickets {} to {} never arrived; going on without them",
                   next_, first - 1);
      next_ = first;
      last_progress_ = now;
      continue;
    }
    auto turn = [this, ticket, &worker_id]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(
                    mu_) { return next_ == ticket || worker_id_ != worker_id; };
    mu_.AwaitWithDeadline(absl::Condition(&turn),
                          std::min(deadline, now + kPoll));
  }
  return absl::OkStatus();
}

void JobSequencer::Leave(const std::string& worker_id, uint64_t ticket) {
  absl::MutexLock lock(&mu_);
  if (worker_id != worker_id_) return;  // the order restarted meanwhile
  arrived_.erase(ticket);
  if (next_ == ticket) {
    ++next_;
    while (abandoned_.erase(next_) > 0) ++next_;
    last_progress_ = absl::Now();
  }
}

}  // namespace shardmap
