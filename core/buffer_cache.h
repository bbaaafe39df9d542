// Large array buffers kept for reuse after they are freed.
//
// Every collective and job allocates its outputs afresh (JAX semantics: a
// new array per result). glibc serves allocations of 32 MiB and more with
// fresh mmaps, so a 64 MiB psum result costs 16384 page faults, each
// zeroing a page, before a byte of it is written: a tenth of a psum's time
// in the profile. Freed buffers of at least kMinBytes are kept here, up to
// a byte capacity, and handed out again for an allocation of exactly the
// same size (repeated jobs and steps have the same shapes). The oldest are
// released first when the capacity would be exceeded.
//
// The cache never holds more array memory than the process had in use: an
// allocation it cannot serve first releases cached buffers (oldest first)
// of at least its size, or all of them, so the bytes of array buffers in
// use plus those cached never pass the most array-buffer bytes (of 1 MiB
// or more) the process ever had in use at once. The capacity only bounds
// what a quiet process keeps until IdleRelease empties the cache.
//
// Thread-safe.
#ifndef SHARDMAP_CORE_BUFFER_CACHE_H_
#define SHARDMAP_CORE_BUFFER_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <list>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace shardmap {

class BufferCache {
 public:
  static constexpr size_t kMinBytes = 1 << 20;
  static constexpr size_t kAlignment = 64;
  static constexpr size_t kDefaultCapacity = size_t{1} << 30;

  // The cache Tensor allocates from.
  static BufferCache& Global();

  explicit BufferCache(size_t capacity = kDefaultCapacity)
      : capacity_(capacity) {}
  ~BufferCache();
  BufferCache(const BufferCache&) = delete;
  BufferCache& operator=(const BufferCache&) = delete;

  // A kAlignment-aligned buffer of `bytes` (at least 1); uninitialized.
  // Throws std::bad_alloc as operator new does.
  uint8_t* Allocate(size_t bytes);
  // Returns a buffer Allocate gave out, with the same size.
  void Free(uint8_t* p, size_t bytes);

  size_t cached_bytes();
  // Releases every cached buffer.
  void Clear();

 private:
  const size_t capacity_;
  absl::Mutex mu_;
  // Oldest first.
  std::list<std::pair<size_t, uint8_t*>> free_ ABSL_GUARDED_BY(mu_);
  size_t cached_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace shardmap

#endif  // SHARDMAP_CORE_BUFFER_CACHE_H_
