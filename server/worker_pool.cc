#include "server/worker_pool.h"

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace shardmap {

absl::StatusOr<std::string> WorkerPool::Register(
    const std::string& address, uint64_t incarnation,
    const std::vector<v1::FunctionSignature>& functions) {
  if (address.empty()) {
    return absl::InvalidArgumentError("worker registered without an address");
  }
  absl::MutexLock lock(&mu_);
  for (auto it = workers_.begin(); it != workers_.end();) {
    if (it->second.address == address) {
      spdlog::info("worker {} at {} re-registered; dropping the old entry",
                   it->second.id, address);
      it = workers_.erase(it);
    } else {
      ++it;
    }
  }
  const uint64_t seq = next_seq_++;
  Worker w{absl::StrCat("w", seq), address, incarnation, options_.clock()};
  workers_[seq] = w;
  for (const auto& f : functions) functions_[f.name()] = f;
  spdlog::info("worker {} joined from {}", w.id, address);
  return w.id;
}

absl::Status WorkerPool::Heartbeat(const std::string& id,
                                   uint64_t incarnation) {
  absl::MutexLock lock(&mu_);
  ExpireLocked();
  for (auto& [seq, w] : workers_) {
    if (w.id == id && w.incarnation == incarnation) {
      w.last_heartbeat = options_.clock();
      return absl::OkStatus();
    }
  }
  return absl::NotFoundError(absl::StrCat("unknown worker ", id));
}

void WorkerPool::ExpireLocked() const {
  const absl::Time now = options_.clock();
  for (auto it = workers_.begin(); it != workers_.end();) {
    if (now - it->second.last_heartbeat > options_.heartbeat_timeout) {
      spdlog::info("worker {} at {} left the pool (no heartbeat for {})",
                   it->second.id, it->second.address,
                   absl::FormatDuration(now - it->second.last_heartbeat));
      it = workers_.erase(it);
    } else {
      ++it;
    }
  }
}

std::vector<WorkerPool::Worker> WorkerPool::LiveWorkers() const {
  absl::MutexLock lock(&mu_);
  ExpireLocked();
  std::vector<Worker> out;
  for (const auto& [seq, w] : workers_) out.push_back(w);
  return out;
}

absl::Status WorkerPool::CheckLive(const std::string& id) const {
  absl::MutexLock lock(&mu_);
  ExpireLocked();
  for (const auto& [seq, w] : workers_) {
    if (w.id == id) return absl::OkStatus();
  }
  return absl::UnavailableError(absl::StrCat(
      "it stopped heartbeating (no heartbeat for over ",
      absl::FormatDuration(options_.heartbeat_timeout), ") and left the pool"));
}

absl::StatusOr<std::vector<WorkerPool::Worker>> WorkerPool::Acquire(
    int64_t n) const {
  std::vector<Worker> live = LiveWorkers();
  if (static_cast<int64_t>(live.size()) < n) {
    return absl::FailedPreconditionError(
        absl::StrCat("the mesh has ", n, " devices but only ", live.size(),
                     " worker", live.size() == 1 ? " is" : "s are",
                     " alive; start more workers or use a smaller mesh"));
  }
  live.resize(n);
  return live;
}

absl::StatusOr<v1::FunctionSignature> WorkerPool::FindFunction(
    const std::string& name) const {
  absl::MutexLock lock(&mu_);
  auto it = functions_.find(name);
  if (it != functions_.end()) return it->second;
  std::vector<std::string> names;
  for (const auto& [n, f] : functions_) names.push_back(n);
  if (names.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot look up function '", name,
        "': no worker has registered yet, so no functions are known"));
  }
  return absl::NotFoundError(
      absl::StrCat("unknown function '", name,
                   "'; known functions: ", absl::StrJoin(names, ", ")));
}

std::vector<v1::FunctionSignature> WorkerPool::Functions() const {
  absl::MutexLock lock(&mu_);
  std::vector<v1::FunctionSignature> out;
  for (const auto& [n, f] : functions_) out.push_back(f);
  return out;
}

}  // namespace shardmap
