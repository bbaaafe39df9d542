#include "worker/resident_store.h"

#include "absl/strings/str_cat.h"

namespace shardmap {
namespace {
constexpr size_t kVersionsKept = 2;
}  // namespace

absl::StatusOr<ResidentStore::Block> ResidentStore::Find(
    const std::string& name, uint64_t version) const {
  absl::MutexLock lock(&mu_);
  auto it = blocks_.find(name);
  if (it != blocks_.end()) {
    for (const Block& b : it->second) {
      if (b.version == version) return b;
    }
  }
  return absl::NotFoundError(absl::StrCat("this worker holds no block of '",
                                          name, "' version ", version));
}

std::vector<std::pair<std::string, ResidentStore::Block>> ResidentStore::All()
    const {
  absl::MutexLock lock(&mu_);
  std::vector<std::pair<std::string, Block>> out;
  for (const auto& [name, versions] : blocks_) {
    if (!versions.empty()) out.emplace_back(name, versions.back());
  }
  return out;
}

void ResidentStore::Stage(const std::string& job_id, const std::string& name,
                          Block block) {
  absl::MutexLock lock(&mu_);
  staged_[job_id].emplace_back(name, std::move(block));
}

void ResidentStore::Commit(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  auto it = staged_.find(job_id);
  if (it == staged_.end()) return;
  for (auto& [name, block] : it->second) PutLocked(name, std::move(block));
  staged_.erase(it);
}

void ResidentStore::Abort(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  staged_.erase(job_id);
}

void ResidentStore::Put(const std::string& name, Block block) {
  absl::MutexLock lock(&mu_);
  PutLocked(name, std::move(block));
}

void ResidentStore::PutLocked(const std::string& name, Block block) {
  std::deque<Block>& versions = blocks_[name];
  versions.push_back(std::move(block));
  while (versions.size() > kVersionsKept) versions.pop_front();
}

void ResidentStore::Drop(const std::string& name) {
  absl::MutexLock lock(&mu_);
  blocks_.erase(name);
}

}  // namespace shardmap
