#include "core/idle_release.h"

#include <malloc.h>
#include <time.h>

#include <algorithm>
#include <mutex>
#include <thread>

#include "core/buffer_cache.h"

namespace shardmap {

IdleReleasePolicy::IdleReleasePolicy(absl::Duration quiet,
                                     const IdleSample& first)
    : quiet_(quiet), last_(first), quiet_since_(first.time) {}

bool IdleReleasePolicy::Tick(const IdleSample& now,
                             const std::function<HeldMemory()>& held) {
  const absl::Duration passed = now.time - last_.time;
  const bool busy = now.activity != last_.activity ||
                    now.cpu - last_.cpu > passed * kBusyCpuShare;
  last_ = now;
  if (busy) {
    quiet_since_ = now.time;
    released_ = false;
    return false;
  }
  if (now.time - quiet_since_ < quiet_) return false;
  // Quiet: release once, and again only if memory was freed since (a
  // buffer that outlived the last allocation, a connection's buffers).
  const HeldMemory h = held();
  free_floor_ = std::min(free_floor_, h.allocator_free);
  return !released_ || h.cached > 0 ||
         h.allocator_free > free_floor_ + kRegrowBytes;
}

void IdleReleasePolicy::Released(const HeldMemory& after) {
  released_ = true;
  free_floor_ = after.allocator_free;
}

namespace {

std::atomic<int64_t> releases{0};

absl::Duration CpuTime(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return absl::DurationFromTimespec(ts);
}

IdleSample Sample() {
  IdleSample s;
  s.time = absl::Now();
  s.activity = idle_release_internal::activity.load();
  // The releaser's own work (malloc_trim, mallinfo2) is not the process's.
  s.cpu = CpuTime(CLOCK_PROCESS_CPUTIME_ID) - CpuTime(CLOCK_THREAD_CPUTIME_ID);
  return s;
}

HeldMemory ReadHeld() {
  const struct mallinfo2 mi = mallinfo2();
  return {mi.fordblks, BufferCache::Global().cached_bytes()};
}

void ReleaseLoop(absl::Duration quiet) {
  IdleReleasePolicy policy(quiet, Sample());
  for (;;) {
    absl::SleepFor(quiet / 4);
    if (!policy.Tick(Sample(), ReadHeld)) continue;
    BufferCache::Global().Clear();
    malloc_trim(0);
    policy.Released(ReadHeld());
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
