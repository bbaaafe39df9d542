// Gives memory back to the kernel once a process has gone quiet.
//
// Under load a server keeps freed memory for reuse: BufferCache holds large
// array buffers, and glibc keeps free chunks in each of its arenas (up to
// the trim threshold TuneProcess sets). Both are right while jobs run and
// waste while the process sits idle, and they made an idle worker's RSS
// grow job after job with the sizes it had seen. A background thread
// watches, every quiet/4, the count of array allocations and the heap's
// bytes in use (mallinfo2); once neither has moved (by more than 1 MiB) for
// a quiet period, it empties BufferCache and calls malloc_trim(0), which
// returns every free page of every arena. It releases once per quiet
// period, and again whenever memory is freed after that release (arrays
// that outlive the last allocation land in BufferCache; gRPC's buffers are
// freed when their calls end), so what a burst leaves behind is given back
// within about quiet + quiet/4 of its last free. A busy process pays one
// mallinfo2 per tick.
#ifndef SHARDMAP_CORE_IDLE_RELEASE_H_
#define SHARDMAP_CORE_IDLE_RELEASE_H_

#include <atomic>
#include <cstdint>

#include "absl/time/time.h"

namespace shardmap {

namespace idle_release_internal {
inline std::atomic<uint64_t> activity{0};
}  // namespace idle_release_internal

// Marks the process busy (Tensor calls it for every allocation).
inline void NoteMemoryActivity() {
  idle_release_internal::activity.fetch_add(1, std::memory_order_relaxed);
}

// Starts the background thread (once per process; later calls do
// nothing). It wakes every quiet/4 and releases memory when no activity
// was seen for `quiet`, as described above.
void StartIdleMemoryRelease(absl::Duration quiet = absl::Seconds(1));

// How many times memory was released so far (for tests).
int64_t IdleMemoryReleases();

}  // namespace shardmap

#endif  // SHARDMAP_CORE_IDLE_RELEASE_H_
