#include "worker/transport/shm/cross_memory.h"

#include <sys/uio.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace shardmap {

absl::Status ProcessVmReader::Read(pid_t pid, uint64_t address,
                                   absl::Span<uint8_t> out) {
  size_t done = 0;
  while (done < out.size()) {
    struct iovec local = {out.data() + done, out.size() - done};
    struct iovec remote = {reinterpret_cast<void*>(address + done),
                           out.size() - done};
    const ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    const int e = n == 0 ? EFAULT : errno;
    if (e == EINTR) continue;
    const std::string what =
        absl::StrCat("process_vm_readv from pid ", pid, ": ", strerror(e));
    if (e == EPERM) return absl::PermissionDeniedError(what);
    if (e == ESRCH) return absl::UnavailableError(what);
    return absl::InternalError(what);
  }
  return absl::OkStatus();
}

ProcessVmReader* ProcessVmReader::Get() {
  static ProcessVmReader* const reader = new ProcessVmReader;
  return reader;
}

absl::Status ProbeSingleCopy(CrossMemory& reader, pid_t pid,
                             uint64_t probe_address, uint64_t expected) {
  if (pid <= 0 || probe_address == 0) {
    return absl::FailedPreconditionError("the sender offered no probe");
  }
  uint64_t word = 0;
  absl::Status s = reader.Read(
      pid, probe_address,
      absl::MakeSpan(reinterpret_cast<uint8_t*>(&word), sizeof(word)));
  if (!s.ok()) return s;
  if (word != expected) {
    return absl::FailedPreconditionError(absl::StrCat(
        "pid ", pid, " is another process here (another pid namespace?)"));
  }
  return absl::OkStatus();
}

}  // namespace shardmap
