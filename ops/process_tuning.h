// Process-wide settings for shardmap's long-running processes.
#ifndef SHARDMAP_CORE_PROCESS_TUNING_H_
#define SHARDMAP_CORE_PROCESS_TUNING_H_

namespace shardmap {

// Call once, first thing in main():
//  - glibc malloc keeps freed memory (gRPC's read buffers, message-sized
//    temporaries) in the heap for reuse instead of returning it to the
//    kernel after every message, which made each buffer page-fault in
//    again inside recvmsg or memcpy. Allocations up to 32 MiB (glibc's
//    limit) come from the heap; up to 128 MiB of free memory is kept.
//  - One malloc arena. glibc otherwise gives busy threads their own arenas
//    (up to 8 per core), and malloc_trim cannot shrink the top of those:
//    each kept what its largest burst left, and an idle worker's RSS grew
//    with every job size it had seen (+60-120% over 2,000 jobs of the
//    load test). No slowdown showed in the collective or job benchmarks.
//  - StartIdleMemoryRelease (core/idle_release.h): once the process has
//    been quiet for a second, what the two caches above keep is returned.
//  - Abseil's mutex deadlock detection, on in Debian's build, records every
//    lock acquisition in a process-wide graph. It is a debugging aid that
//    costs every lock; it is turned off.
void TuneProcess();

}  // namespace shardmap

#endif  // SHARDMAP_CORE_PROCESS_TUNING_H_
