// Gives memory back to the kernel once a process has gone quiet.
//
// Under load a server keeps freed memory for reuse: BufferCache holds large
// array buffers, and glibc keeps free chunks in its arena (up to the trim
// threshold TuneProcess sets). Both are right while jobs run and waste
// while the process sits idle, and they made an idle worker's RSS grow job
// after job with the sizes it had seen. A background thread wakes every
// quiet/4 and reads two cheap signs of work: the count of array
// allocations (NoteMemoryActivity) and the CPU time the process used
// (its own excepted). Once neither has moved (CPU: by more than
// kBusyCpuShare of the time passed) for a quiet period, it empties
// BufferCache and calls malloc_trim(0), which returns every free page of
// every arena. It releases once per quiet period, and again whenever memory
// is freed after that release (arrays that outlive the last allocation land
// in BufferCache; gRPC's buffers are freed when their calls end), so what a
// burst leaves behind is given back within about quiet + quiet/4 of its
// last free. Only a quiet process reads the allocator's free bytes
// (mallinfo2, which walks the arena under its lock); a busy one pays two
// clock reads per tick.
#ifndef SHARDMAP_CORE_IDLE_RELEASE_H_
#define SHARDMAP_CORE_IDLE_RELEASE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>

#include "absl/time/time.h"

namespace shardmap {

namespace idle_release_internal {
inline std::atomic<uint64_t> activity{0};
}  // namespace idle_release_internal

// Marks the process busy (Tensor calls it for every allocation).
inline void NoteMemoryActivity() {
  idle_release_internal::activity.fetch_add(1, std::memory_order_relaxed);
}

// What the releaser reads at every tick.
struct IdleSample {
  absl::Time time;
  uint64_t activity = 0;  // NoteMemoryActivity calls so far
  absl::Duration cpu;     // CPU time of the process so far, less the
                          // releaser's own
};

// Memory a release would give back.
struct HeldMemory {
  size_t allocator_free = 0;  // free bytes malloc keeps (mallinfo2)
  size_t cached = 0;          // bytes in BufferCache
};

// When to release, apart from the thread, its clock and its readings (so
// it can be tested with made-up ones). Not thread-safe: one releaser owns
// it.
class IdleReleasePolicy {
 public:
  // A tick in which the process used more CPU than this share of the time
  // passed is busy. An idle server (heartbeats, keepalive pings) uses well
  // under 1%; one that moves a job's buffers uses most of a core.
  static constexpr double kBusyCpuShare = 0.02;
  // Free memory the allocator may gather after a release before it is
  // released again.
  static constexpr size_t kRegrowBytes = size_t{4} << 20;

  IdleReleasePolicy(absl::Duration quiet, const IdleSample& first);

  // Whether to release now, given this tick's reading. `held` is called
  // only once the process has been quiet for the whole quiet period.
  bool Tick(const IdleSample& now, const std::function<HeldMemory()>& held);
  // Records a release, and the memory held right after it.
  void Released(const HeldMemory& after);

 private:
  const absl::Duration quiet_;
  IdleSample last_;
  absl::Time quiet_since_;
  bool released_ = false;
  // The least free memory the allocator held since the last release.
  size_t free_floor_ = 0;
};

// Starts the background thread (once per process; later calls do
// nothing). It wakes every quiet/4 and releases memory when the process
// was quiet for `quiet`, as described above.
void StartIdleMemoryRelease(absl::Duration quiet = absl::Seconds(1));

// How many times memory was released so far (for tests).
int64_t IdleMemoryReleases();

}  // namespace shardmap

#endif  // SHARDMAP_CORE_IDLE_RELEASE_H_
