// ResidentIndex::Report: rebuilding the index from the blocks workers
// report when they register (after a coordinator restart, or a worker's).
#include <spdlog/spdlog.h>

#include <algorithm>

#include "core/block_math.h"
#include "server/resident_index.h"

namespace shardmap {
namespace {

// A new entry, no device reported yet, for the array `b` belongs to.
absl::StatusOr<ResidentArray> ArrayOf(const ReportedBlock& b) {
  if (absl::Status s = ResidentIndex::ValidateName(b.name); !s.ok()) return s;
  if (!b.meta.has_value() || !b.mesh.has_value()) {
    return absl::InvalidArgumentError("the worker did not say its layout");
  }
  auto layout =
      BlockLayout::Create(*b.mesh, b.spec, b.meta->shape, "its spec", b.name);
  if (!layout.ok()) return layout.status();
  ResidentArray a;
  a.name = b.name;
  a.meta = *b.meta;
  a.mesh = *b.mesh;
  a.spec = b.spec;
  a.version = b.version;
  a.worker_ids.assign(b.mesh->num_devices(), "");
  a.addresses.assign(b.mesh->num_devices(), "");
  return a;
}

// Whether `b` says the layout `a` has (true when it says none).
bool SameLayout(const ResidentArray& a, const ReportedBlock& b) {
  if (!b.meta.has_value() || !b.mesh.has_value()) return true;
  return a.meta.dtype == b.meta->dtype && a.meta.shape == b.meta->shape &&
         SameSharding(a.mesh, a.spec, *b.mesh, b.spec, a.meta.shape.size());
}

}  // namespace

ResidentIndex::Outcome ResidentIndex::Report(
    const std::string& worker_id, const std::string& address,
    const std::vector<ReportedBlock>& blocks) {
  // Newest first: a worker's newer version of a name starts the entry its
  // older one is then measured against.
  std::vector<const ReportedBlock*> order;
  for (const ReportedBlock& b : blocks) order.push_back(&b);
  std::stable_sort(order.begin(), order.end(),
                   [](const ReportedBlock* x, const ReportedBlock* y) {
                     return x->version > y->version;
                   });
  Outcome out;
  absl::MutexLock lock(&mu_);
  for (const ReportedBlock* b : order) {
    if (TakeLocked(worker_id, address, *b, &out.drop)) ++out.taken;
  }
  return out;
}

bool ResidentIndex::TakeLocked(const std::string& worker_id,
                               const std::string& address,
                               const ReportedBlock& b,
                               std::vector<ReportedBlock>* drop) {
  // Versions issued from now on are above every one a worker holds.
  last_version_ = std::max(last_version_, b.version);
  // Issued by this coordinator and not (yet) committed: a job may be
  // committing it right now, so it is neither taken nor dropped.
  const bool issued_here = first_issued_ != 0 && b.version >= first_issued_ &&
                           b.version <= last_issued_;
  auto it = arrays_.find(b.name);
  if (it == arrays_.end()) {
    auto deleted = deleted_.find(b.name);
    if (deleted != deleted_.end() && b.version <= deleted->second) {
      drop->push_back(b);
      return false;
    }
    if (issued_here) return false;
    auto a = ArrayOf(b);
    if (!a.ok()) {
      spdlog::warn(
          "worker {} holds '{}' version {}, which cannot be rebuilt: {}",
          worker_id, b.name, b.version, std::string(a.status().message()));
      return false;
    }
    it = arrays_.emplace(b.name, Entry{*std::move(a), true, {}, 0}).first;
  }
  Entry& e = it->second;
  if (e.rebuilt) {
    if (issued_here) return false;
    return TakeCandidateLocked(e, worker_id, address, b, drop);
  }
  if (b.version == e.array.version) {
    return HoldLocked(e.array, /*check_layout=*/false, worker_id, address, b);
  }
  // Older than the version written in this lifetime: superseded. Newer:
  // written in this lifetime after the block's, so the block is older
  // whatever its number says (a clock stepped back).
  if (b.version > e.array.version && issued_here) return false;
  drop->push_back(b);
  return false;
}

bool ResidentIndex::TakeCandidateLocked(Entry& e, const std::string& worker_id,
                                        const std::string& address,
                                        const ReportedBlock& b,
                                        std::vector<ReportedBlock>* drop) {
  // Superseded only by a version complete on every device: a newer one
  // that is not may never be (a commit that failed on some workers).
  if (b.version < e.superseded_below) {
    drop->push_back(b);
    return false;
  }
  ResidentArray* candidate = &e.array;
  if (b.version != e.array.version) {
    auto other = e.others.find(b.version);
    if (other == e.others.end()) {
      auto a = ArrayOf(b);
      if (!a.ok()) return false;
      other = e.others.emplace(b.version, *std::move(a)).first;
    }
    candidate = &other->second;
  }
  if (!HoldLocked(*candidate, /*check_layout=*/true, worker_id, address, b)) {
    return false;
  }
  SettleLocked(e);
  if (b.version > e.array.version) {
    spdlog::info(
        "worker {} holds '{}' version {} (device {}), newer than version {}, "
        "which is complete and is served; the newer one is kept on the "
        "worker and wins once every device of it is reported",
        worker_id, b.name, b.version, b.device, e.array.version);
  }
  return true;
}

bool ResidentIndex::HoldLocked(ResidentArray& a, bool check_layout,
                               const std::string& worker_id,
                               const std::string& address,
                               const ReportedBlock& b) {
  if (b.device < 0 || b.device >= static_cast<int64_t>(a.worker_ids.size()) ||
      (check_layout && !SameLayout(a, b))) {
    spdlog::warn(
        "worker {} reports a block of '{}' version {} (device {}) that does "
        "not fit the array; ignored",
        worker_id, b.name, b.version, b.device);
    return false;
  }
  std::string& holder = a.worker_ids[b.device];
  if (!holder.empty() && holder != worker_id && is_live_(holder)) {
    return false;  // a live worker holds that device's block already
  }
  holder = worker_id;
  a.addresses[b.device] = address;
  return true;
}

bool ResidentIndex::CompleteLocked(const ResidentArray& a) const {
  for (const std::string& holder : a.worker_ids) {
    if (holder.empty() || !is_live_(holder)) return false;
  }
  return true;
}

void ResidentIndex::SettleLocked(Entry& e) {
  // The newest complete candidate, else the newest.
  uint64_t pick = e.array.version;
  bool pick_complete = CompleteLocked(e.array);
  const bool was_complete = pick_complete;
  for (const auto& [version, a] : e.others) {
    const bool complete = CompleteLocked(a);
    if ((complete && !pick_complete) ||
        (complete == pick_complete && version > pick)) {
      pick = version;
      pick_complete = complete;
    }
  }
  if (pick != e.array.version) {
    auto chosen = e.others.find(pick);
    ResidentArray was = std::move(e.array);
    e.array = std::move(chosen->second);
    e.others.erase(chosen);
    e.others.emplace(was.version, std::move(was));
  }
  // Older candidates than a complete version are out; their blocks
  // reported so far stay with their workers until their next version or
  // registration.
  if (!pick_complete) return;
  e.superseded_below = std::max(e.superseded_below, pick);
  e.others.erase(e.others.begin(), e.others.lower_bound(pick));
  if (!was_complete && !e.others.empty()) {
    spdlog::warn(
        "resident array '{}' is back at version {}, complete on every "
        "device; newer version {} is not (a write that was not committed "
        "everywhere?): its blocks are left on their workers, and it wins "
        "if every device of it is reported",
        e.array.name, pick, e.others.rbegin()->first);
  }
}

}  // namespace shardmap
