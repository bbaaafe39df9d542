#include "core/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <functional>

#include "absl/strings/str_cat.h"

namespace shardmap {
namespace {

std::string Directory(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// A temporary name next to `path` that no other call uses.
std::string TemporaryPath(const std::string& path) {
  static std::atomic<uint64_t> counter{0};
  return absl::StrCat(path, ".tmp.", ::getpid(), ".", counter.fetch_add(1));
}

// Renames the complete, synced `tmp` over `path` and syncs the directory;
// `tmp` is removed if the rename fails.
absl::Status Publish(const std::string& tmp, const std::string& path) {
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return FileError("rename a temporary file to", path, err);
  }
  return SyncDirectory(Directory(path));
}

}  // namespace

int WriteAllPieces(int fd, absl::Span<const absl::string_view> pieces) {
  for (absl::string_view bytes : pieces) {
    while (!bytes.empty()) {
      const ssize_t n = ::write(fd, bytes.data(), bytes.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return errno;
      if (n == 0) return EIO;
      bytes.remove_prefix(static_cast<size_t>(n));
    }
  }
  return 0;
}

absl::Status FileError(absl::string_view what, absl::string_view path,
                       int err) {
  std::string message =
      absl::StrCat("cannot ", what, " ", path, ": ", std::strerror(err));
  if (err == ENOSPC || err == EDQUOT || err == EFBIG) {
    return absl::ResourceExhaustedError(message);
  }
  return absl::InternalError(message);
}

absl::StatusOr<std::string> ReadSmallFile(const std::string& path,
                                          uint64_t max_bytes) {
  // O_NONBLOCK: opening a FIFO put in a file's place must not wait for a
  // writer; the type check below then refuses it.
  const int fd =
      ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0 && errno == ENOENT) {
    return absl::NotFoundError(absl::StrCat(path, " does not exist"));
  }
  if (fd < 0) return FileError("open", path, errno);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return FileError("inspect", path, err);
  }
  if (!S_ISREG(st.st_mode) || static_cast<uint64_t>(st.st_size) > max_bytes) {
    ::close(fd);
    return absl::InvalidArgumentError(
        S_ISREG(st.st_mode)
            ? absl::StrCat(path, " is ", st.st_size, " bytes; at most ",
                           max_bytes, " are read")
            : absl::StrCat(path, " is not a regular file"));
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      ::close(fd);
      return FileError("read", path, err);
    }
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  return text;
}

absl::Status SyncDirectory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return FileError("open directory", dir, errno);
  int err = ::fsync(fd) == 0 ? 0 : errno;
  ::close(fd);
  // Some file systems cannot sync a directory; their renames are as
  // durable as they get.
  if (err != 0 && err != EINVAL && err != ENOTSUP) {
    return FileError("sync directory", dir, err);
  }
  return absl::OkStatus();
}

absl::Status WriteFileAtomicallyAt(int dir_fd, const std::string& name,
                                   const std::string& path,
                                   absl::Span<const absl::string_view> pieces,
                                   FileMode mode) {
  static std::atomic<uint64_t> counter{0};
  const std::string tmp =
      absl::StrCat(name, ".tmp.", ::getpid(), ".", counter.fetch_add(1));
  const int fd =
      ::openat(dir_fd, tmp.c_str(),
               O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode.bits);
  if (fd < 0) return FileError("create", path, errno);
  const char* step = "set the permissions of";
  int err = mode.exact && ::fchmod(fd, mode.bits) != 0 ? errno : 0;
  if (err == 0) {
    err = WriteAllPieces(fd, pieces);
    step = "write";
  }
  if (err == 0 && ::fsync(fd) != 0) {
    err = errno;
    step = "sync";
  }
  if (::close(fd) != 0 && err == 0) {
    err = errno;
    step = "close";
  }
  if (err == 0 && ::renameat(dir_fd, tmp.c_str(), dir_fd, name.c_str()) != 0) {
    err = errno;
    step = "rename a temporary file to";
  }
  if (err != 0) {
    ::unlinkat(dir_fd, tmp.c_str(), 0);
    return FileError(step, path, err);
  }
  // Some file systems cannot sync a directory; their renames are as
  // durable as they get.
  if (::fsync(dir_fd) != 0 && errno != EINVAL && errno != ENOTSUP) {
    return FileError("sync directory", Directory(path), errno);
  }
  return absl::OkStatus();
}

absl::Status WriteFileAtomically(const std::string& path,
                                 absl::Span<const absl::string_view> pieces,
                                 FileMode mode) {
  const int dir_fd =
      ::open(Directory(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) return FileError("create", path, errno);
  const size_t slash = path.rfind('/');
  absl::Status s = WriteFileAtomicallyAt(
      dir_fd, slash == std::string::npos ? path : path.substr(slash + 1), path,
      pieces, mode);
  ::close(dir_fd);
  return s;
}

absl::Status ReplaceFileAtomically(
    const std::string& path,
    const std::function<absl::Status(const std::string& tmp)>& write) {
  const std::string tmp = TemporaryPath(path);
  absl::Status s = write(tmp);
  if (s.ok()) {
    const int fd = ::open(tmp.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    int err = fd < 0 ? errno : 0;
    if (err == 0 && ::fsync(fd) != 0) err = errno;
    if (fd >= 0) ::close(fd);
    if (err != 0) s = FileError("sync", path, err);
  }
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return s;
  }
  return Publish(tmp, path);
}

}  // namespace shardmap
