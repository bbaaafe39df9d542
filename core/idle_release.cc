#include "core/idle_release.h"

#include <malloc.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "core/buffer_cache.h"

namespace shardmap {
namespace {

// A change of the bytes in use bigger than this between two ticks is
// activity: a job's buffers being freed (or allocated) outside Tensor.
constexpr size_t kChurnBytes = size_t{1} << 20;
// Free memory the allocator may gather after a release before it is
// released again, if no single tick freed kChurnBytes.
constexpr size_t kRegrowBytes = size_t{4} << 20;

std::atomic<int64_t> releases{0};

struct Heap {
  size_t in_use;  // allocated and not freed, including mmapped chunks
  size_t free;    // free bytes the allocator holds
};

Heap ReadHeap() {
  const struct mallinfo2 mi = mallinfo2();
  return {mi.uordblks + mi.hblkhd, mi.fordblks};
}

size_t Distance(size_t a, size_t b) { return a > b ? a - b : b - a; }

void ReleaseLoop(absl::Duration quiet) {
  const absl::Duration tick = quiet / 4;
  uint64_t seen = idle_release_internal::activity.load();
  Heap last = ReadHeap();
  absl::Time quiet_since = absl::Now();
  bool released = false;
  // The least free memory the allocator held since the last release.
  size_t free_floor = last.free;
  for (;;) {
    absl::SleepFor(tick);
    const uint64_t now = idle_release_internal::activity.load();
    const Heap heap = ReadHeap();
    const bool churn = Distance(heap.in_use, last.in_use) > kChurnBytes;
    last = heap;
    free_floor = std::min(free_floor, heap.free);
    if (now != seen || churn) {
      seen = now;
      quiet_since = absl::Now();
      released = false;
      continue;
    }
    if (absl::Now() - quiet_since < quiet) continue;
    // Quiet: release once, and again only if memory was freed since (a
    // buffer that outlived the last allocation, a connection's buffers).
    const bool regrown = heap.free > free_floor + kRegrowBytes ||
                         BufferCache::Global().cached_bytes() > 0;
    if (released && !regrown) continue;
    BufferCache::Global().Clear();
    malloc_trim(0);
    released = true;
    free_floor = ReadHeap().free;
    last = ReadHeap();
    releases.fetch_add(1);
  }
}

}  // namespace

void StartIdleMemoryRelease(absl::Duration quiet) {
  static std::once_flag once;
  std::call_once(once, [quiet] {
    // Lives as long as the process; it holds no resource worth joining.
    std::thread(ReleaseLoop, quiet).detach();
  });
}

int64_t IdleMemoryReleases() { return releases.load(); }

}  // namespace shardmap
