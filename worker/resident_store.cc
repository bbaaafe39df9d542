#include "worker/resident_store.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "core/dtype.h"
#include "core/npy.h"

namespace shardmap {
namespace {
constexpr size_t kVersionsKept = 2;

// One flat directory per array: its name with '/' and '%' escaped, so no
// name's files can ever land in another name's directory.
std::string DirectoryName(const std::string& name) {
  std::string out;
  for (char c : name) {
    if (c == '/') {
      out += "%2F";
    } else if (c == '%') {
      out += "%25";
    } else {
      out += c;
    }
  }
  return out;
}

// The block's array layout in its current.json, if known.
void WriteLayout(const ResidentStore::Block& b, nlohmann::json* meta) {
  if (!b.layout.has_value()) return;
  (*meta)["dtype"] = DTypeName(b.layout->meta.dtype);
  (*meta)["shape"] = b.layout->meta.shape;
  (*meta)["mesh"] = b.layout->mesh.ToString();
  (*meta)["spec"] = b.layout->spec.ToString();
}

// Reads what WriteLayout wrote; a file without it (or with a layout that
// does not parse) leaves the block's layout unknown: the block then only
// serves an array the coordinator still knows.
void ReadLayout(const nlohmann::json& meta, ResidentStore::Block* b) {
  try {
    if (!meta.contains("mesh") || !meta.contains("spec") ||
        !meta.contains("dtype") || !meta.contains("shape")) {
      return;
    }
    auto dtype = ParseDType(meta.at("dtype").get<std::string>());
    auto mesh = Mesh::Parse(meta.at("mesh").get<std::string>());
    auto spec = PartitionSpec::Parse(meta.at("spec").get<std::string>());
    if (!dtype.ok() || !mesh.ok() || !spec.ok()) return;
    b->layout = ResidentStore::ArrayLayout{
        ArrayMeta{*dtype, meta.at("shape").get<Shape>()}, *mesh, *spec};
  } catch (const nlohmann::json::exception&) {
    b->layout.reset();
  }
}
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

void ResidentStore::Persist(const std::string& name, const Block& b) const {
  if (directory_.empty()) return;
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path dir = fs::path(directory_) / "arrays" / DirectoryName(name);
  fs::create_directories(dir, ec);
  // The data first, then the metadata that makes it count: a crash in
  // between leaves the previous version in effect.
  const fs::path data = dir / absl::StrCat("v", b.version, ".npy");
  if (absl::Status s = WriteNpy(data.string(), *b.data); !s.ok()) {
    spdlog::warn("cannot keep '{}' in {}: {}", name, directory_,
                 std::string(s.message()));
    return;
  }
  nlohmann::json meta = {{"name", name},
                         {"version", b.version},
                         {"device", b.device},
                         {"origin", b.box.origin},
                         {"file", data.filename().string()}};
  WriteLayout(b, &meta);
  const fs::path tmp = dir / "current.json.tmp";
  std::ofstream(tmp) << meta.dump();
  fs::rename(tmp, dir / "current.json", ec);
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string f = entry.path().filename().string();
    if (f.size() > 4 && f.rfind("v", 0) == 0 && f != data.filename().string()) {
      fs::remove(entry.path(), ec);
    }
  }
}

void ResidentStore::Unpersist(const std::string& name) const {
  if (directory_.empty()) return;
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path dir = fs::path(directory_) / "arrays" / DirectoryName(name);
  // The metadata first, so a crash midway leaves no metadata pointing at
  // a missing file.
  fs::remove(dir / "current.json", ec);
  fs::remove_all(dir, ec);
}

absl::StatusOr<int> ResidentStore::LoadDirectory() {
  if (directory_.empty()) return 0;
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path root = fs::path(directory_) / "arrays";
  if (!fs::exists(root, ec)) return 0;
  int loaded = 0;
  for (const auto& entry : fs::recursive_directory_iterator(root, ec)) {
    if (entry.path().filename() != "current.json") continue;
    nlohmann::json meta;
    try {
      std::ifstream(entry.path()) >> meta;
      Block b;
      b.version = meta.at("version").get<uint64_t>();
      b.device = meta.at("device").get<int64_t>();
      b.box.origin = meta.at("origin").get<std::vector<int64_t>>();
      auto t = ReadNpy(
          (entry.path().parent_path() / meta.at("file").get<std::string>())
              .string());
      if (!t.ok()) return t.status();
      b.box.shape = t->shape();
      ReadLayout(meta, &b);
      b.data = std::make_shared<const Tensor>(*std::move(t));
      absl::MutexLock lock(&mu_);
      blocks_[meta.at("name").get<std::string>()].push_back(std::move(b));
      ++loaded;
    } catch (const nlohmann::json::exception& e) {
      return absl::DataLossError(
          absl::StrCat("malformed ", entry.path().string(), ": ", e.what()));
    }
  }
  return loaded;
}

void ResidentStore::PutLocked(const std::string& name, Block block) {
  Persist(name, block);
  std::deque<Block>& versions = blocks_[name];
  versions.push_back(std::move(block));
  while (versions.size() > kVersionsKept) versions.pop_front();
}

void ResidentStore::Drop(const std::string& name) {
  absl::MutexLock lock(&mu_);
  blocks_.erase(name);
  Unpersist(name);
}

uint64_t ResidentStore::Bytes() const {
  absl::MutexLock lock(&mu_);
  uint64_t total = 0;
  for (const auto& [name, versions] : blocks_) {
    for (const Block& b : versions) total += b.data ? b.data->num_bytes() : 0;
  }
  return total;
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

void ResidentStore::DropVersion(const std::string& name, uint64_t version) {
  absl::MutexLock lock(&mu_);
  auto it = blocks_.find(name);
  if (it == blocks_.end()) return;
  std::deque<Block>& versions = it->second;
  const bool newest = !versions.empty() && versions.back().version == version;
  versions.erase(std::remove_if(versions.begin(), versions.end(),
                                [version](const Block& b) {
                                  return b.version == version;
                                }),
                 versions.end());
  if (versions.empty()) {
    blocks_.erase(it);
    Unpersist(name);
  } else if (newest) {
    // The directory kept the dropped one: keep the one that stays.
    Unpersist(name);
    Persist(name, versions.back());
  }
}
// --- end of what the worker reports ---

}  // namespace shardmap
