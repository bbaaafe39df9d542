// glibc malloc settings for processes that stream large arrays.
#ifndef SHARDMAP_CORE_MALLOC_TUNING_H_
#define SHARDMAP_CORE_MALLOC_TUNING_H_

namespace shardmap {

// Keeps freed memory (gRPC's read buffers, message-sized temporaries) in
// the heap for reuse instead of returning it to the kernel after every
// message: otherwise each buffer is page-faulted in again, inside recvmsg
// or memcpy. Allocations up to 32 MiB come from the heap; up to 128 MiB
// of free memory is kept. Call once, first thing in main().
void TuneMallocForStreaming();

}  // namespace shardmap

#endif  // SHARDMAP_CORE_MALLOC_TUNING_H_
