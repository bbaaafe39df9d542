#include "server/resident_index.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "core/array_name.h"

namespace shardmap {

ResidentIndex::ResidentIndex(std::function<bool(const std::string&)> is_live,
                             std::function<uint64_t()> now_micros)
    : is_live_(std::move(is_live)), now_micros_(std::move(now_micros)) {}

uint64_t ResidentIndex::WallMicros() {
  return static_cast<uint64_t>(absl::ToUnixMicros(absl::Now()));
}

absl::Status ResidentIndex::ValidateName(const std::string& name) {
  return ValidateArrayName(name);
}

std::string ResidentIndex::LostReason(const ResidentArray& a) const {
  if (!a.lost.empty()) return a.lost;
  std::vector<std::string> missing;
  for (size_t d = 0; d < a.worker_ids.size(); ++d) {
    if (a.worker_ids[d].empty()) {
      missing.push_back(absl::StrCat(d));
    } else if (!is_live_(a.worker_ids[d])) {
      return absl::StrCat("worker ", a.worker_ids[d],
                          " held a block of it and left the pool");
    }
  }
  if (missing.empty()) return "";
  return absl::StrCat(
      "since the coordinator restarted, no worker has "
      "reported its block of device",
      missing.size() > 1 ? "s " : " ", absl::StrJoin(missing, ", "), " (of ",
      a.worker_ids.size(), ", version ", a.version, ")");
}

absl::StatusOr<ResidentArray> ResidentIndex::Find(
    const std::string& name) const {
  ResidentArray a;
  {
    absl::MutexLock lock(&mu_);
    auto it = arrays_.find(name);
    if (it == arrays_.end()) {
      return absl::NotFoundError(
          absl::StrCat("no resident array named '", name, "'"));
    }
    a = it->second.array;
  }
  const std::string lost = LostReason(a);
  if (!lost.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("resident array '", name, "' was lost: ", lost,
                     "; put it again or restore a checkpoint"));
  }
  return a;
}

absl::Status ResidentIndex::CheckWrite(const std::string& name,
                                       const ArrayMeta& meta, const Mesh& mesh,
                                       const PartitionSpec& spec,
                                       bool overwrite) const {
  if (absl::Status s = ValidateName(name); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  auto it = arrays_.find(name);
  if (it == arrays_.end() || overwrite) return absl::OkStatus();
  const ArrayMeta& old = it->second.array.meta;
  if (old.dtype != meta.dtype || old.shape != meta.shape) {
    return absl::FailedPreconditionError(absl::StrCat(
        "resident array '", name, "' is ", ShapeString(old.dtype, old.shape),
        "; writing ", ShapeString(meta.dtype, meta.shape),
        " over it needs --overwrite"));
  }
  const ResidentArray& a = it->second.array;
  if (!SameSharding(a.mesh, a.spec, mesh, spec, meta.shape.size())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "resident array '", name, "' is sharded ", a.spec.ToString(), " over ",
        a.mesh.ToString(), "; writing it sharded ", spec.ToString(), " over ",
        mesh.ToString(), " needs --overwrite"));
  }
  return absl::OkStatus();
}

uint64_t ResidentIndex::NextVersion() {
  absl::MutexLock lock(&mu_);
  last_version_ = std::max(last_version_ + 1, now_micros_());
  if (first_issued_ == 0) first_issued_ = last_version_;
  last_issued_ = last_version_;
  return last_version_;
}

namespace {

// Adds to `out` where blocks of `old` may be kept that `now` does not
// hold at the same device in the same layout.
void AddSuperseded(const ResidentArray& old, const ResidentArray& now,
                   std::set<std::pair<std::string, uint64_t>>& out) {
  const bool same_layout = old.meta.dtype == now.meta.dtype &&
                           old.meta.shape == now.meta.shape &&
                           SameSharding(old.mesh, old.spec, now.mesh, now.spec,
                                        old.meta.shape.size());
  for (size_t d = 0; d < old.addresses.size(); ++d) {
    const std::string& address = old.addresses[d];
    if (address.empty()) continue;  // nobody reported it since a restart
    if (same_layout && d < now.addresses.size() &&
        now.addresses[d] == address) {
      continue;  // its previous version, beside the new one
    }
    const bool holds_now = std::find(now.addresses.begin(), now.addresses.end(),
                                     address) != now.addresses.end();
    // A worker of the new version drops exactly the old one; any other
    // drops every version of the name.
    out.emplace(address, holds_now ? old.version : 0);
  }
}

}  // namespace

std::vector<ResidentIndex::Superseded> ResidentIndex::Commit(
    ResidentArray array) {
  absl::MutexLock lock(&mu_);
  deleted_.erase(array.name);
  std::set<std::pair<std::string, uint64_t>> superseded;
  auto it = arrays_.find(array.name);
  if (it != arrays_.end()) {
    AddSuperseded(it->second.array, array, superseded);
    for (const auto& [version, other] : it->second.others) {
      AddSuperseded(other, array, superseded);
    }
  }
  std::string name = array.name;
  arrays_[name] = Entry{std::move(array), false, {}, 0};
  std::vector<Superseded> out;
  for (const auto& [address, version] : superseded) {
    // Every version covers the exact ones (sorted first: version 0).
    if (!out.empty() && out.back().address == address &&
        out.back().version == 0) {
      continue;
    }
    out.push_back(Superseded{address, version});
  }
  return out;
}

void ResidentIndex::MarkLost(const std::string& name, uint64_t version,
                             const std::string& reason) {
  absl::MutexLock lock(&mu_);
  auto it = arrays_.find(name);
  if (it != arrays_.end() && it->second.array.version == version) {
    it->second.array.lost = reason;
  }
}

absl::StatusOr<ResidentArray> ResidentIndex::Remove(const std::string& name) {
  absl::MutexLock lock(&mu_);
  auto it = arrays_.find(name);
  if (it == arrays_.end()) {
    return absl::NotFoundError(
        absl::StrCat("no resident array named '", name, "'"));
  }
  ResidentArray a = std::move(it->second.array);
  arrays_.erase(it);
  // Blocks of it that workers report later (from before a restart) are
  // gone with it.
  deleted_[name] = std::max(a.version, last_version_);
  return a;
}

std::vector<ResidentArray> ResidentIndex::All() const {
  absl::MutexLock lock(&mu_);
  std::vector<ResidentArray> out;
  for (const auto& [name, e] : arrays_) out.push_back(e.array);
  return out;
}

std::vector<v1::ResidentInfo> ResidentIndex::List(
    const std::string& prefix) const {
  std::vector<v1::ResidentInfo> out;
  for (const ResidentArray& a : All()) {
    if (!absl::StartsWith(a.name, prefix)) continue;
    out.push_back(ToInfo(a, !LostReason(a).empty()));
  }
  return out;
}

v1::ResidentInfo ResidentIndex::ToInfo(const ResidentArray& a, bool lost) {
  v1::ResidentInfo info;
  info.set_name(a.name);
  *info.mutable_header() = HeaderToProto(a.meta.dtype, a.meta.shape);
  *info.mutable_mesh() = MeshToProto(a.mesh);
  *info.mutable_spec() = SpecToProto(a.spec);
  for (const std::string& id : a.worker_ids) info.add_worker_ids(id);
  info.set_version(a.version);
  info.set_lost(lost);
  info.set_bytes(a.meta.num_bytes());
  return info;
}

}  // namespace shardmap
