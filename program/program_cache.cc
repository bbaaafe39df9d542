#include "program/program_cache.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace shardmap {
namespace program {
namespace {

// Everything CheckProgram's result depends on, as one string.
std::string KeyOf(absl::string_view source, const Mesh& mesh,
                  const std::vector<ArgType>& args,
                  const CheckOptions& options) {
  std::string key = absl::StrCat(
      mesh.ToString(), "|", options.check_vma ? 1 : 0, "|",
      absl::StrJoin(options.manual_axes, ","), "|",
      options.limits.max_source_bytes, ",", options.limits.max_instructions,
      ",", options.limits.max_peak_bytes);
  for (const ArgType& a : args) {
    absl::StrAppend(&key, "|", ElemTypeName(a.elem), "[",
                    absl::StrJoin(a.block_shape, ","), "]{",
                    absl::StrJoin(a.vma, ","), "}");
  }
  absl::StrAppend(&key, "|", source);
  return key;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const Program>> ProgramCache::Check(
    absl::string_view source, const Mesh& mesh,
    const std::vector<ArgType>& args, const CheckOptions& options) {
  std::string key = KeyOf(source, mesh, args, options);
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(key);
    if (it != entries_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second.position);
      return it->second.program;
    }
  }
  // Checked outside the lock: two threads may check the same program at
  // once, and the second one's result replaces the first's.
  absl::StatusOr<Program> checked = CheckProgram(source, mesh, args, options);
  if (!checked.ok()) return checked.status();
  auto program = std::make_shared<const Program>(*std::move(checked));
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(key);
  if (it != entries_.end()) {
    lru_.erase(it->second.position);
    entries_.erase(it);
  }
  lru_.push_front(key);
  entries_.emplace(std::move(key), Entry{program, lru_.begin()});
  while (entries_.size() > capacity_) {
    entries_.erase(lru_.back());
    lru_.pop_back();
  }
  return program;
}

absl::StatusOr<std::shared_ptr<const Program>> CheckShared(
    ProgramCache* cache, absl::string_view source, const Mesh& mesh,
    const std::vector<ArgType>& args, const CheckOptions& options) {
  if (cache != nullptr) return cache->Check(source, mesh, args, options);
  absl::StatusOr<Program> checked = CheckProgram(source, mesh, args, options);
  if (!checked.ok()) return checked.status();
  return std::make_shared<const Program>(*std::move(checked));
}

size_t ProgramCache::size() const {
  absl::MutexLock lock(&mu_);
  return entries_.size();
}

}  // namespace program
}  // namespace shardmap
