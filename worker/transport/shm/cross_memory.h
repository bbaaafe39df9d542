// Single-copy transfers between processes on one host: the receiver copies
// a message straight out of the sender's memory with process_vm_readv
// (Linux "cross memory attach", CMA), the way MPI's vader and NCCL's P2P
// do, instead of the sender copying it into a ring and the receiver
// copying it out again.
//
// The kernel allows it only when the reader may ptrace the sender: same
// user and no Yama restriction above 1 (kernel.yama.ptrace_scope), no
// seccomp filter refusing the call, and both in one pid namespace (the
// sender's pid must name it for the reader). ProbeSingleCopy checks all of
// that at once, when a channel is set up, by reading a word whose value the
// reader knows; a refusal keeps the channel on the ring.
//
// Thread-safe.
#ifndef SHARDMAP_WORKER_TRANSPORT_SHM_CROSS_MEMORY_H_
#define SHARDMAP_WORKER_TRANSPORT_SHM_CROSS_MEMORY_H_

#include <sys/types.h>

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace shardmap {

// Reads another process's memory. An interface so tests can refuse.
class CrossMemory {
 public:
  virtual ~CrossMemory() = default;
  // Copies out.size() bytes from `address` in process `pid` into `out`.
  // Errors: PERMISSION_DENIED (EPERM: not allowed to), UNAVAILABLE (ESRCH:
  // no such process), INTERNAL (EFAULT and anything else), each naming
  // the errno.
  virtual absl::Status Read(pid_t pid, uint64_t address,
                            absl::Span<uint8_t> out) = 0;
};

// process_vm_readv.
class ProcessVmReader final : public CrossMemory {
 public:
  absl::Status Read(pid_t pid, uint64_t address,
                    absl::Span<uint8_t> out) override;
  // The process-wide instance.
  static ProcessVmReader* Get();
};

// Whether `reader` can read process `pid`'s memory: reads the 8 bytes at
// `probe_address` there and compares them with `expected`. OK, or the
// reason it cannot (the Read error, or FAILED_PRECONDITION when the word
// differs: `pid` is another process, e.g. in another pid namespace).
absl::Status ProbeSingleCopy(CrossMemory& reader, pid_t pid,
                             uint64_t probe_address, uint64_t expected);

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_TRANSPORT_SHM_CROSS_MEMORY_H_
