#include "client/output_file.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/atomic_file.h"
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
  const std::string header = NpyHeader(tensor);
  const absl::string_view pieces[] = {header, TensorBytes(tensor)};
  if (exists && !S_ISREG(st.st_mode)) {
    // A FIFO or a device: write into it, never replace the node.
    const int fd = ::open(target.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return Fail("open", path, target, errno);
    int err = WriteAllPieces(fd, pieces);
    if (::close(fd) != 0 && err == 0) err = errno;
    if (err != 0) return Fail("write", path, target, err);
    return absl::OkStatus();
  }
  // A replaced file keeps its permission bits; a new one gets 0666 less
  // the umask, as a shell redirection would create it.
  const FileMode mode = exists ? FileMode{st.st_mode & 07777, /*exact=*/true}
                               : FileMode{0666, /*exact=*/false};
  const absl::Status s = WriteFileAtomically(target, pieces, mode);
  if (!s.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "output file ", Describe(path, target), ": ", s.message()));
  }
  return absl::OkStatus();
}

}  // namespace shardmap
