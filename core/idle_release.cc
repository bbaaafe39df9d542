#include "core/idle_release.h"

#include <malloc.h>

#include <mutex>
#include <thread>

#include "core/buffer_cache.h"

namespace shardmap {
namespace {

std::atomic<int64_t> releases{0};

void ReleaseLoop(absl::Duration quiet) {
  const absl::Duration tick = quiet / 4;
  uint64_t seen = idle_release_internal::activity.load();
  absl::Time quiet_since = absl::Now();
  bool released = false;
  for (;;) {
    absl::SleepFor(tick);
    const uint64_t now = idle_release_internal::activity.load();
    if (now != seen) {
      seen = now;
      quiet_since = absl::Now();
      released = false;
      continue;
    }
    if (released || absl::Now() - quiet_since < quiet) continue;
    BufferCache::Global().Clear();
    malloc_trim(0);
    released = true;
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
