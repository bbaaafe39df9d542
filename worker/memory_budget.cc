#include "worker/memory_budget.h"

#include "absl/strings/str_cat.h"

namespace shardmap {

MemoryBudget::Reservation& MemoryBudget::Reservation::operator=(
    Reservation&& other) noexcept {
  if (this != &other) {
    Release();
    budget_ = other.budget_;
    bytes_ = other.bytes_;
    other.budget_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

void MemoryBudget::Reservation::Release() {
  if (budget_ == nullptr) return;
  absl::MutexLock lock(&budget_->mu_);
  budget_->reserved_ -= bytes_;
  budget_ = nullptr;
  bytes_ = 0;
}

absl::StatusOr<MemoryBudget::Reservation> MemoryBudget::Reserve(
    uint64_t bytes, const std::string& what) {
  Reservation r;
  if (limit_ == 0) return r;
  const uint64_t resident = resident_bytes_ ? resident_bytes_() : 0;
  absl::MutexLock lock(&mu_);
  if (bytes > limit_ || resident + reserved_ > limit_ - bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat(what, " need ", bytes, " bytes; with ", resident,
                     " bytes of resident arrays and ", reserved_,
                     " bytes held by running jobs this worker would exceed its "
                     "--memory-budget of ",
                     limit_, " bytes"));
  }
  reserved_ += bytes;
  r.budget_ = this;
  r.bytes_ = bytes;
  return r;
}

uint64_t MemoryBudget::reserved() const {
  absl::MutexLock lock(&mu_);
  return reserved_;
}

}  // namespace shardmap
