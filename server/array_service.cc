#include "server/array_service.h"

#include <spdlog/spdlog.h>

#include <memory>
#include <set>

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "server/checkpoint.h"
#include "server/worker_calls.h"

namespace shardmap {

std::vector<v1::ResidentInfo> ArrayService::List(
    const std::string& prefix) const {
  return index_->List(prefix);
}

absl::Status ArrayService::Delete(const std::string& name,
                                  const std::string& call_id,
                                  absl::Time deadline) {
  std::unique_ptr<CallRegistry::Claim> claim;
  if (!call_id.empty() && call_registry_ != nullptr) {
    auto begun = call_registry_->Begin(
        call_id, absl::HashOf(std::string("delete"), name),
        absl::StrCat("delete '", name, "'"), deadline);
    if (!begun.ok()) return begun.status();
    if (begun->done != nullptr) return absl::OkStatus();  // deleted before
    claim = std::move(begun->claim);
  }
  auto held = locks_->Acquire({}, {name}, deadline);
  if (!held.ok()) return held.status();
  auto removed = index_->Remove(name);
  if (!removed.ok()) return removed.status();
  if (claim != nullptr) {
    claim->Finish(std::make_shared<CallRegistry::Outcome>());
  }
  // Freeing the blocks is best effort: a worker that is gone has freed
  // them already. A device nobody reported since a restart has no holder.
  for (const std::string& address : removed->addresses) {
    if (address.empty()) continue;
    absl::Status s = calls_->DropArray(address, name, deadline);
    if (!s.ok()) {
      spdlog::info("dropping '{}' on {}: {}", name, address,
                   std::string(s.message()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ResidentArray>> ArrayService::Save(
    const std::string& directory, absl::Time deadline) {
  // Hold every array still while it is written.
  std::set<std::string> names;
  for (const auto& a : index_->All()) names.insert(a.name);
  auto held = locks_->Acquire(names, {}, deadline);
  if (!held.ok()) return held.status();
  auto saved = SaveCheckpoint(directory, *index_, *calls_, deadline);
  if (saved.ok()) {
    spdlog::info("saved {} resident arrays to {}", saved->size(), directory);
  }
  return saved;
}

absl::StatusOr<std::vector<ResidentArray>> ArrayService::Restore(
    const std::string& directory, absl::Time deadline) {
  auto restored =
      RestoreCheckpoint(directory, *index_, *pool_, *calls_, deadline);
  if (restored.ok()) {
    spdlog::info("restored {} resident arrays from {}", restored->size(),
                 directory);
  }
  return restored;
}

}  // namespace shardmap
