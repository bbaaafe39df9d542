#include "worker/store/resident_store.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "core/array_name.h"

namespace shardmap {
namespace {
constexpr size_t kVersionsKept = 2;
}  // namespace

ResidentStore::ResidentStore(std::string directory) {
  if (!directory.empty()) {
    disk_ = std::make_unique<StateDir>(std::move(directory));
  }
}

absl::StatusOr<ResidentStore::Block> ResidentStore::Find(
    const std::string& name, uint64_t version) const {
  absl::MutexLock lock(&mu_);
  auto it = blocks_.find(name);
  if (it != blocks_.end()) {
    for (const Block& b : it->second) {
      if (b.version == version) return b;
    }
  }
  for (const auto& [job_id, blocks] : exposed_) {
    for (const auto& [exposed_name, b] : blocks) {
      if (exposed_name == name && b.version == version) return b;
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

void ResidentStore::Expose(const std::string& job_id, const std::string& name,
                           Block block) {
  absl::MutexLock lock(&mu_);
  exposed_[job_id].emplace_back(name, std::move(block));
}

absl::Status ResidentStore::Commit(const std::string& job_id) {
  std::vector<std::pair<std::string, Block>> blocks;
  std::vector<std::pair<std::string, Block>> exposed;  // freed unlocked
  {
    absl::MutexLock lock(&mu_);
    if (auto e = exposed_.find(job_id); e != exposed_.end()) {
      exposed = std::move(e->second);
      exposed_.erase(e);
    }
    auto it = staged_.find(job_id);
    if (it == staged_.end()) return absl::OkStatus();
    blocks = std::move(it->second);
    staged_.erase(it);
  }
  return Store(std::move(blocks));
}

void ResidentStore::Abort(const std::string& job_id) {
  std::vector<std::pair<std::string, Block>> staged, exposed;  // freed after
  absl::MutexLock lock(&mu_);
  if (auto it = staged_.find(job_id); it != staged_.end()) {
    staged = std::move(it->second);
    staged_.erase(it);
  }
  if (auto it = exposed_.find(job_id); it != exposed_.end()) {
    exposed = std::move(it->second);
    exposed_.erase(it);
  }
}

absl::Status ResidentStore::Put(const std::string& name, Block block) {
  std::vector<std::pair<std::string, Block>> blocks;
  blocks.emplace_back(name, std::move(block));
  return Store(std::move(blocks));
}

absl::Status ResidentStore::Store(
    std::vector<std::pair<std::string, Block>> blocks) {
  for (const auto& [name, block] : blocks) {
    if (absl::Status s = ValidateArrayName(name); !s.ok()) return s;
  }
  absl::MutexLock writing(&disk_mu_);
  if (disk_ != nullptr) {
    std::vector<std::pair<std::string, const Block*>> persist;
    for (const auto& [name, block] : blocks) persist.emplace_back(name, &block);
    if (absl::Status s = disk_->Persist(persist); !s.ok()) return s;
  }
  absl::MutexLock lock(&mu_);
  for (auto& [name, block] : blocks) {
    std::deque<Block>& versions = blocks_[name];
    versions.push_back(std::move(block));
    while (versions.size() > kVersionsKept) versions.pop_front();
  }
  return absl::OkStatus();
}

absl::Status ResidentStore::Drop(const std::string& name) {
  if (absl::Status s = ValidateArrayName(name); !s.ok()) return s;
  absl::MutexLock writing(&disk_mu_);
  {
    absl::MutexLock lock(&mu_);
    blocks_.erase(name);
  }
  return disk_ != nullptr ? disk_->Remove(name) : absl::OkStatus();
}

absl::StatusOr<int> ResidentStore::LoadDirectory() {
  if (disk_ == nullptr) return 0;
  std::vector<StateDir::Loaded> loaded;
  std::vector<BadArray> bad;
  absl::MutexLock writing(&disk_mu_);
  disk_->Load(&loaded, &bad);
  for (const BadArray& b : bad) {
    spdlog::error("state dir: cannot load {}{}: {}; it is lost on this worker",
                  b.name.empty() ? "" : absl::StrCat("'", b.name, "' from "),
                  b.path, b.reason);
  }
  absl::MutexLock lock(&mu_);
  int n = 0;
  for (StateDir::Loaded& l : loaded) {
    std::deque<Block>& versions = blocks_[l.name];
    versions.push_back(std::move(l.block));
    ++n;
  }
  bad_.insert(bad_.end(), bad.begin(), bad.end());
  return n;
}

std::vector<ResidentStore::BadArray> ResidentStore::BadArrays() const {
  absl::MutexLock lock(&mu_);
  return bad_;
}

uint64_t ResidentStore::Bytes() const {
  absl::MutexLock lock(&mu_);
  uint64_t total = 0;
  for (const auto& [name, versions] : blocks_) {
    for (const Block& b : versions) total += b.data ? b.data->num_bytes() : 0;
  }
  return total;
}

void ResidentStore::DropBefore(const std::string& name, uint64_t version) {
  std::deque<Block> dropped;  // freed outside the lock
  absl::MutexLock lock(&mu_);
  auto it = blocks_.find(name);
  if (it == blocks_.end()) return;
  std::deque<Block>& versions = it->second;
  while (!versions.empty() && versions.front().version < version) {
    dropped.push_back(std::move(versions.front()));
    versions.pop_front();
  }
  if (versions.empty()) blocks_.erase(it);
}

absl::StatusOr<ResidentStore::Block> ResidentStore::Take(
    const std::string& name, uint64_t version) {
  absl::MutexLock lock(&mu_);
  auto it = blocks_.find(name);
  std::deque<Block>* versions = it != blocks_.end() ? &it->second : nullptr;
  auto taken = versions == nullptr
                   ? std::deque<Block>::iterator()
                   : std::find_if(versions->begin(), versions->end(),
                                  [version](const Block& b) {
                                    return b.version == version;
                                  });
  if (versions == nullptr || taken == versions->end()) {
    return absl::NotFoundError(absl::StrCat("this worker holds no block of '",
                                            name, "' version ", version));
  }
  Block out = std::move(*taken);
  versions->erase(versions->begin(), taken + 1);
  if (versions->empty()) blocks_.erase(it);
  return out;
}

// --- What the worker reports when it (re-)registers ---

std::vector<std::pair<std::string, ResidentStore::Block>>
ResidentStore::AllVersions() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::pair<std::string, Block>> out;
  for (const auto& [name, versions] : blocks_) {
    for (const Block& b : versions) out.emplace_back(name, b);
  }
  return out;
}

absl::Status ResidentStore::Drop(const std::string& name, uint64_t version) {
  if (absl::Status s = ValidateArrayName(name); !s.ok()) return s;
  return DropVersion(name, version);
}

absl::Status ResidentStore::DropVersion(const std::string& name,
                                        uint64_t version) {
  absl::MutexLock writing(&disk_mu_);
  std::optional<Block> stays;  // the version the disk keeps instead
  bool none_left = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = blocks_.find(name);
    if (it == blocks_.end()) return absl::OkStatus();
    std::deque<Block>& versions = it->second;
    const bool newest = !versions.empty() && versions.back().version == version;
    versions.erase(std::remove_if(versions.begin(), versions.end(),
                                  [version](const Block& b) {
                                    return b.version == version;
                                  }),
                   versions.end());
    none_left = versions.empty();
    if (none_left) {
      blocks_.erase(it);
    } else if (newest) {
      stays = versions.back();
    }
  }
  if (disk_ == nullptr) return absl::OkStatus();
  if (none_left) return disk_->Remove(name);
  if (stays.has_value()) return disk_->Persist({{name, &*stays}});
  return absl::OkStatus();
}
// --- end of what the worker reports ---

}  // namespace shardmap
