#include "client/output_file.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/npy.h"

namespace shardmap {
namespace {

constexpr int kMaxLinks = 40;  // as the kernel's own limit (ELOOP)

// `path` as the user gave it, and where it led when that differs.
std::string Describe(const std::string& path, const std::string& resolved) {
  return resolved == path ? absl::StrCat("'", path, "'")
                          : absl::StrCat("'", path, "' (-> '", resolved, "')");
}

absl::Status Fail(absl::string_view what, const std::string& path,
                  const std::string& resolved, int err) {
  return absl::FailedPreconditionError(
      absl::StrCat("cannot ", what, " output file ", Describe(path, resolved),
                   ": ", std::strerror(err)));
}

// 0 or the errno of the first failed write.
int WriteAll(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return 0;
}

int WriteTensor(int fd, const Tensor& tensor) {
  const std::string header = NpyHeader(tensor);
  int err = WriteAll(fd, header.data(), header.size());
  if (err == 0) err = WriteAll(fd, tensor.data(), tensor.num_bytes());
  return err;
}

}  // namespace

absl::StatusOr<std::string> ResolveOutputPath(const std::string& path) {
  std::string p = path;
  for (int links = 0; links <= kMaxLinks; ++links) {
    struct stat st;
    if (::lstat(p.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return p;
    char target[PATH_MAX];
    const ssize_t n = ::readlink(p.c_str(), target, sizeof(target) - 1);
    if (n < 0) return Fail("follow the link of", path, p, errno);
    target[n] = '\0';
    if (target[0] == '/') {
      p = target;
    } else {
      const size_t slash = p.rfind('/');
      p = slash == std::string::npos
              ? std::string(target)
              : absl::StrCat(p.substr(0, slash + 1), target);
    }
  }
  return Fail("follow the links of", path, p, ELOOP);
}

absl::Status WriteOutputNpy(const std::string& path, const Tensor& tensor) {
  auto resolved = ResolveOutputPath(path);
  if (!resolved.ok()) return resolved.status();
  const std::string& target = *resolved;
  struct stat st;
  const bool exists = ::stat(target.c_str(), &st) == 0;
  if (exists && S_ISDIR(st.st_mode)) {
    return Fail("write", path, target, EISDIR);
  }
  if (exists && !S_ISREG(st.st_mode)) {
    // A FIFO or a device: write into it, never replace the node.
    const int fd = ::open(target.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return Fail("open", path, target, errno);
    int err = WriteTensor(fd, tensor);
    if (::close(fd) != 0 && err == 0) err = errno;
    if (err != 0) return Fail("write", path, target, err);
    return absl::OkStatus();
  }
  const std::string tmp = absl::StrCat(target, ".tmp.", ::getpid());
  const int fd = ::open(
      tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0666);
  if (fd < 0) return Fail("create", path, target, errno);
  int err = 0;
  // The replaced file's permissions carry over (umask applies to a new one).
  if (exists && ::fchmod(fd, st.st_mode & 07777) != 0) err = errno;
  // No fsync: the rename makes the write atomic for readers, which is what
  // matters here; durability across a machine crash is not promised.
  if (err == 0) err = WriteTensor(fd, tensor);
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err == 0 && ::rename(tmp.c_str(), target.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    return Fail("write", path, target, err);
  }
  return absl::OkStatus();
}

}  // namespace shardmap
