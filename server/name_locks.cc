#include "server/name_locks.h"

#include "absl/strings/str_cat.h"

namespace shardmap {

NameLocks::Held::~Held() { owner_->Release(reads_, writes_); }

absl::StatusOr<std::unique_ptr<NameLocks::Held>> NameLocks::Acquire(
    std::set<std::string> reads, std::set<std::string> writes,
    absl::Time deadline) {
  for (const std::string& w : writes) reads.erase(w);
  absl::MutexLock lock(&mu_);
  auto free = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (const std::string& r : reads) {
      if (writers_.count(r) > 0) return false;
    }
    for (const std::string& w : writes) {
      if (writers_.count(w) > 0 || readers_.count(w) > 0) return false;
    }
    return true;
  };
  if (!mu_.AwaitWithDeadline(absl::Condition(&free), deadline)) {
    // Name the first array that was still in use.
    std::string busy;
    for (const std::string& r : reads) {
      if (busy.empty() && writers_.count(r) > 0) busy = r;
    }
    for (const std::string& w : writes) {
      if (busy.empty() && (writers_.count(w) > 0 || readers_.count(w) > 0)) {
        busy = w;
      }
    }
    return absl::DeadlineExceededError(absl::StrCat(
        "the job's deadline passed while it waited for other jobs using the "
        "same resident arrays ('",
        busy, "' was in use)"));
  }
  for (const std::string& r : reads) ++readers_[r];
  for (const std::string& w : writes) writers_.insert(w);
  return std::unique_ptr<Held>(
      new Held(this, std::move(reads), std::move(writes)));
}

void NameLocks::Release(const std::set<std::string>& reads,
                        const std::set<std::string>& writes) {
  absl::MutexLock lock(&mu_);
  for (const std::string& r : reads) {
    if (--readers_[r] <= 0) readers_.erase(r);
  }
  for (const std::string& w : writes) writers_.erase(w);
}

}  // namespace shardmap
