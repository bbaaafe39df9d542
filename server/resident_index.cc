#include "server/resident_index.h"

#include <cctype>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/array_name.h"

namespace shardmap {

absl::Status ResidentIndex::ValidateName(const std::string& name) {
  return ValidateArrayName(name);
}

std::string ResidentIndex::LostHolder(const ResidentArray& a) const {
  for (const std::string& id : a.worker_ids) {
    if (!is_live_(id)) return id;
  }
  return "";
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
    a = it->second;
  }
  const std::string lost = LostHolder(a);
  if (!lost.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "resident array '", name, "' was lost: worker ", lost,
        " held a block of it and left the pool; put it again or restore a "
        "checkpoint"));
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
  const ArrayMeta& old = it->second.meta;
  if (old.dtype != meta.dtype || old.shape != meta.shape) {
    return absl::FailedPreconditionError(absl::StrCat(
        "resident array '", name, "' is ", ShapeString(old.dtype, old.shape),
        "; writing ", ShapeString(meta.dtype, meta.shape),
        " over it needs --overwrite"));
  }
  const ResidentArray& a = it->second;
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
  return next_version_++;
}

void ResidentIndex::Commit(ResidentArray array) {
  absl::MutexLock lock(&mu_);
  arrays_[array.name] = std::move(array);
}

int ResidentIndex::Rebind(
    const std::vector<std::tuple<std::string, uint64_t, int64_t>>& held,
    const std::string& worker_id, const std::string& address) {
  int rebound = 0;
  for (const auto& [name, version, device] : held) {
    std::string old_id;
    {
      absl::MutexLock lock(&mu_);
      auto it = arrays_.find(name);
      if (it == arrays_.end() || it->second.version != version || device < 0 ||
          device >= static_cast<int64_t>(it->second.worker_ids.size())) {
        continue;
      }
      old_id = it->second.worker_ids[device];
    }
    if (is_live_(old_id)) continue;
    absl::MutexLock lock(&mu_);
    auto it = arrays_.find(name);
    if (it == arrays_.end() || it->second.version != version) continue;
    it->second.worker_ids[device] = worker_id;
    it->second.addresses[device] = address;
    ++rebound;
  }
  return rebound;
}

absl::StatusOr<ResidentArray> ResidentIndex::Remove(const std::string& name) {
  absl::MutexLock lock(&mu_);
  auto it = arrays_.find(name);
  if (it == arrays_.end()) {
    return absl::NotFoundError(
        absl::StrCat("no resident array named '", name, "'"));
  }
  ResidentArray a = std::move(it->second);
  arrays_.erase(it);
  return a;
}

std::vector<ResidentArray> ResidentIndex::All() const {
  absl::MutexLock lock(&mu_);
  std::vector<ResidentArray> out;
  for (const auto& [name, a] : arrays_) out.push_back(a);
  return out;
}

std::vector<v1::ResidentInfo> ResidentIndex::List(
    const std::string& prefix) const {
  std::vector<v1::ResidentInfo> out;
  for (const ResidentArray& a : All()) {
    if (!absl::StartsWith(a.name, prefix)) continue;
    out.push_back(ToInfo(a, !LostHolder(a).empty()));
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
