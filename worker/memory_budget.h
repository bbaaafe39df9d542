// A worker's memory budget (--memory-budget): the bytes of its resident
// blocks plus the buffers of the jobs it runs must stay under a limit.
// A job reserves its argument bytes before they are allocated and its
// output bytes before they are sent or stored; a reservation over the
// limit is RESOURCE_EXHAUSTED, saying the bytes and the limit.
//
// Thread-safe.
#ifndef SHARDMAP_WORKER_MEMORY_BUDGET_H_
#define SHARDMAP_WORKER_MEMORY_BUDGET_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace shardmap {

class MemoryBudget {
 public:
  // `limit` 0: no limit. `resident_bytes` reports the resident blocks'
  // bytes (may be null: none).
  MemoryBudget(uint64_t limit, std::function<uint64_t()> resident_bytes)
      : limit_(limit), resident_bytes_(std::move(resident_bytes)) {}

  // Bytes held until destroyed (movable).
  class Reservation {
   public:
    Reservation() = default;
    Reservation(Reservation&& other) noexcept { *this = std::move(other); }
    Reservation& operator=(Reservation&& other) noexcept;
    ~Reservation() { Release(); }
    void Release();

   private:
    friend class MemoryBudget;
    MemoryBudget* budget_ = nullptr;
    uint64_t bytes_ = 0;
  };

  // Reserves `bytes` for `what` (e.g. "job-3's arguments on device 2").
  absl::StatusOr<Reservation> Reserve(uint64_t bytes, const std::string& what);
  uint64_t reserved() const;

 private:
  const uint64_t limit_;
  const std::function<uint64_t()> resident_bytes_;
  mutable absl::Mutex mu_;
  uint64_t reserved_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_MEMORY_BUDGET_H_
