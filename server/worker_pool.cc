#include "server/worker_pool.h"

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/function_availability.h"

namespace shardmap {
namespace {

// Devices 0..n-1 of a mesh placed on `live` (in registration order): rank i
// takes device i, unranked workers fill the devices no rank claims.
struct Placement {
  std::vector<WorkerPool::Worker> workers;  // filled only when complete
  std::vector<int64_t> missing;             // devices left without a worker
  bool any_ranked = false;
  int64_t draining = 0;  // live workers left out because they are draining
};

Placement Place(const std::vector<WorkerPool::Worker>& live, int64_t n) {
  Placement p;
  std::vector<const WorkerPool::Worker*> slots(n, nullptr);
  std::vector<const WorkerPool::Worker*> unranked;
  for (const auto& w : live) {
    if (w.draining) {
      ++p.draining;
      continue;
    }
    if (!w.rank.has_value()) {
      unranked.push_back(&w);
      continue;
    }
    p.any_ranked = true;
    if (*w.rank < n) slots[*w.rank] = &w;
  }
  size_t next = 0;
  for (int64_t d = 0; d < n; ++d) {
    if (slots[d] == nullptr && next < unranked.size()) {
      slots[d] = unranked[next++];
    }
    if (slots[d] == nullptr) p.missing.push_back(d);
  }
  if (p.missing.empty()) {
    for (const auto* w : slots) p.workers.push_back(*w);
  }
  return p;
}

std::string MissingRanks(const std::vector<int64_t>& missing) {
  return absl::StrCat("missing rank", missing.size() == 1 ? " " : "s ",
                      absl::StrJoin(missing, ", "));
}

}  // namespace

absl::StatusOr<std::string> WorkerPool::Register(
    const std::string& address, uint64_t incarnation,
    const std::vector<v1::FunctionSignature>& functions,
    std::optional<int64_t> rank, bool inline_chunks) {
  if (address.empty()) {
    return absl::InvalidArgumentError("worker registered without an address");
  }
  if (rank.has_value() && *rank < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank must be 0 or more, got ", *rank));
  }
  absl::MutexLock lock(&mu_);
  ExpireLocked();
  for (const auto& [seq, w] : workers_) {
    if (rank.has_value() && w.rank == rank && w.address != address) {
      return absl::AlreadyExistsError(absl::StrCat(
          "rank ", *rank, " is held by live worker ", w.id, " at ", w.address,
          "; two workers cannot share a rank (it frees up when that worker "
          "stops heartbeating for ",
          absl::FormatDuration(options_.heartbeat_timeout), ")"));
    }
  }
  for (auto it = workers_.begin(); it != workers_.end();) {
    if (it->second.address == address) {
      spdlog::info("worker {} at {} re-registered; dropping the old entry",
                   it->second.id, address);
      if (it->second.incarnation != incarnation) LeftLocked(it->second);
      it = workers_.erase(it);
    } else {
      ++it;
    }
  }
  auto offered =
      std::make_shared<std::map<std::string, v1::FunctionSignature>>();
  for (const auto& f : functions) {
    functions_[f.name()] = f;
    (*offered)[f.name()] = f;
  }
  const uint64_t seq = next_seq_++;
  Worker w{absl::StrCat("w", seq), address, incarnation,
           options_.clock(),       rank,    false,
           std::move(offered)};
  w.inline_chunks = inline_chunks;
  workers_[seq] = w;
  spdlog::info("worker {} joined from {}{}", w.id, address,
               rank.has_value() ? absl::StrCat(" as rank ", *rank) : "");
  return w.id;
}

absl::Status WorkerPool::Heartbeat(const std::string& id, uint64_t incarnation,
                                   bool draining) {
  absl::MutexLock lock(&mu_);
  ExpireLocked();
  for (auto& [seq, w] : workers_) {
    if (w.id == id && w.incarnation == incarnation) {
      w.last_heartbeat = options_.clock();
      if (draining && !w.draining) {
        spdlog::info("worker {} at {} is draining: no new jobs go to it", w.id,
                     w.address);
      }
      w.draining = w.draining || draining;
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
      LeftLocked(it->second);
      it = workers_.erase(it);
    } else {
      ++it;
    }
  }
}

void WorkerPool::LeftLocked(const Worker& w) const {
  if (options_.on_leave) options_.on_leave(w.address);
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
  const std::vector<Worker> live = LiveWorkers();
  Placement p = Place(live, n);
  if (p.missing.empty()) return std::move(p.workers);
  const std::string ranks =
      p.any_ranked ? absl::StrCat(" (", MissingRanks(p.missing), ")") : "";
  const int64_t usable = static_cast<int64_t>(live.size()) - p.draining;
  const std::string draining =
      p.draining > 0 ? absl::StrCat(" and ", p.draining, " shutting down") : "";
  if (usable < n) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the mesh has ", n, " devices but only ", usable, " worker",
        usable == 1 ? " is" : "s are", " alive", draining, ranks,
        "; start more workers or use a smaller mesh"));
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "the mesh has ", n, " devices and ", usable,
      " workers are alive, but no live worker has rank",
      p.missing.size() == 1 ? " " : "s ", absl::StrJoin(p.missing, ", "),
      "; device i runs on the worker of rank i"));
}

absl::Status WorkerPool::CheckComplete(int64_t expected) const {
  const std::vector<Worker> live = LiveWorkers();
  const Placement p = Place(live, expected);
  if (p.missing.empty()) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat(
      expected - static_cast<int64_t>(p.missing.size()), "/", expected,
      " workers registered",
      p.any_ranked ? absl::StrCat(", ", MissingRanks(p.missing)) : "",
      p.draining > 0 ? absl::StrCat(" (", p.draining, " shutting down)") : ""));
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
  std::vector<v1::FunctionSignature> live = FunctionsOfWorkers(LiveWorkers());
  if (!live.empty()) return live;
  absl::MutexLock lock(&mu_);
  std::vector<v1::FunctionSignature> out;
  for (const auto& [n, f] : functions_) out.push_back(f);
  return out;
}

}  // namespace shardmap
