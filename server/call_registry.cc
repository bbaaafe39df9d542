#include "server/call_registry.h"

#include "absl/strings/str_cat.h"

namespace shardmap {

CallRegistry::Claim::~Claim() {
  if (!finished_) registry_->Release(call_id_);
}

void CallRegistry::Claim::Finish(std::shared_ptr<Outcome> outcome) {
  finished_ = true;
  registry_->Finish(call_id_, std::move(outcome));
}

absl::StatusOr<CallRegistry::Begun> CallRegistry::Begin(
    const std::string& call_id, uint64_t request_hash, const std::string& what,
    absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  EvictLocked(options_.clock());
  for (;;) {
    auto it = calls_.find(call_id);
    if (it == calls_.end()) {
      Entry& e = calls_[call_id];
      e.request_hash = request_hash;
      e.what = what;
      return Begun{std::unique_ptr<Claim>(new Claim(this, call_id)), nullptr};
    }
    const Entry& e = it->second;
    if (e.request_hash != request_hash) {
      return absl::InvalidArgumentError(absl::StrCat(
          "call_id '", call_id, "' was already used for another request (",
          e.what, "); a new call needs a new call_id"));
    }
    if (!e.running) return Begun{nullptr, e.outcome};
    // The first call still runs (its client may not know yet that it lost
    // the connection): wait for its outcome.
    if (options_.on_wait) options_.on_wait(call_id);
    if (changed_.WaitWithDeadline(&mu_, deadline) && absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("call_id '", call_id, "' (", what,
                       ") is still running from an earlier attempt"));
    }
  }
}

void CallRegistry::Finish(const std::string& call_id,
                          std::shared_ptr<Outcome> outcome) {
  uint64_t bytes = 0;
  for (const auto& t : outcome->outputs) {
    if (t != nullptr) bytes += t->num_bytes();
  }
  absl::MutexLock lock(&mu_);
  auto it = calls_.find(call_id);
  if (it == calls_.end()) return;
  Entry& e = it->second;
  e.running = false;
  const absl::Time now = options_.clock();
  e.expires = now + options_.keep;
  if (bytes > options_.max_output_bytes) {
    outcome->outputs.clear();
    outcome->outputs_kept = false;
    bytes = 0;
  }
  e.output_bytes = bytes;
  output_bytes_ += bytes;
  e.outcome = std::move(outcome);
  finished_.push_back(call_id);
  EvictLocked(now);
  changed_.SignalAll();
}

void CallRegistry::Release(const std::string& call_id) {
  absl::MutexLock lock(&mu_);
  auto it = calls_.find(call_id);
  if (it != calls_.end() && it->second.running) calls_.erase(it);
  changed_.SignalAll();
}

void CallRegistry::EvictLocked(absl::Time now) {
  // Every name in finished_ has a finished entry in calls_ (only eviction
  // removes one, and it pops the name with it).
  // Whole outcomes: expired, or over the count (oldest first).
  while (!finished_.empty()) {
    auto it = calls_.find(finished_.front());
    if (it->second.expires > now && finished_.size() <= options_.max_calls) {
      break;
    }
    output_bytes_ -= it->second.output_bytes;
    calls_.erase(it);
    finished_.pop_front();
  }
  // Then outputs, oldest first, down to the byte budget; the outcome
  // stays and answers ALREADY_EXISTS.
  for (auto name = finished_.begin();
       output_bytes_ > options_.max_output_bytes && name != finished_.end();
       ++name) {
    Entry& e = calls_.find(*name)->second;
    if (e.output_bytes == 0) continue;
    auto trimmed = std::make_shared<Outcome>(*e.outcome);
    trimmed->outputs.clear();
    trimmed->outputs_kept = false;
    e.outcome = std::move(trimmed);
    output_bytes_ -= e.output_bytes;
    e.output_bytes = 0;
  }
}

size_t CallRegistry::size() {
  absl::MutexLock lock(&mu_);
  return calls_.size();
}

}  // namespace shardmap
