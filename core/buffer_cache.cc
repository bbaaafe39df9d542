#include "core/buffer_cache.h"

#include <new>
#include <vector>

namespace shardmap {
namespace {

uint8_t* NewBuffer(size_t bytes) {
  return static_cast<uint8_t*>(::operator new[](
      bytes == 0 ? 1 : bytes, std::align_val_t(BufferCache::kAlignment)));
}

void DeleteBuffer(uint8_t* p) {
  ::operator delete[](p, std::align_val_t(BufferCache::kAlignment));
}

}  // namespace

BufferCache& BufferCache::Global() {
  // Never destroyed: tensors may be freed during static destruction.
  static BufferCache* cache = new BufferCache();
  return *cache;
}

BufferCache::~BufferCache() { Clear(); }

uint8_t* BufferCache::Allocate(size_t bytes) {
  std::vector<uint8_t*> released;
  if (bytes >= kMinBytes) {
    absl::MutexLock lock(&mu_);
    // Newest first: the likeliest to be still in the CPU's caches.
    for (auto it = free_.rbegin(); it != free_.rend(); ++it) {
      if (it->first == bytes) {
        uint8_t* p = it->second;
        cached_ -= bytes;
        free_.erase(std::next(it).base());
        return p;
      }
    }
    // A new buffer takes the place of cached ones.
    size_t freed = 0;
    while (freed < bytes && !free_.empty()) {
      freed += free_.front().first;
      cached_ -= free_.front().first;
      released.push_back(free_.front().second);
      free_.pop_front();
    }
  }
  for (uint8_t* q : released) DeleteBuffer(q);
  return NewBuffer(bytes);
}

void BufferCache::Free(uint8_t* p, size_t bytes) {
  if (p == nullptr) return;
  if (bytes < kMinBytes || bytes > capacity_) {
    DeleteBuffer(p);
    return;
  }
  std::vector<uint8_t*> released;
  {
    absl::MutexLock lock(&mu_);
    free_.emplace_back(bytes, p);
    cached_ += bytes;
    while (cached_ > capacity_) {
      cached_ -= free_.front().first;
      released.push_back(free_.front().second);
      free_.pop_front();
    }
  }
  for (uint8_t* q : released) DeleteBuffer(q);
}

size_t BufferCache::cached_bytes() {
  absl::MutexLock lock(&mu_);
  return cached_;
}

void BufferCache::Clear() {
  std::list<std::pair<size_t, uint8_t*>> all;
  {
    absl::MutexLock lock(&mu_);
    all.swap(free_);
    cached_ = 0;
  }
  for (auto& [bytes, p] : all) DeleteBuffer(p);
}

}  // namespace shardmap
