#include "worker/store/checkpoint_blocks.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/array_name.h"
#include "core/atomic_file.h"
#include "core/block_math.h"
#include "core/digest.h"
#include "core/npy.h"
#include "core/status_util.h"
#include "wire/proto_convert.h"

namespace shardmap {
namespace {

absl::Status NoPath(const std::string& path) {
  if (path.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      "a block request's 'path' is no longer accepted; the coordinator must "
      "send 'directory' and 'file'");
}

// A file descriptor, closed when it goes.
class UniqueFd {
 public:
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    std::swap(fd_, other.fd_);
    return *this;
  }
  ~UniqueFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

absl::Status NotPlain(const std::string& at, absl::string_view what) {
  return absl::DataLossError(
      absl::StrCat("checkpoint path ", at, " is ", what,
                   "; a checkpoint holds only plain files and directories"));
}

absl::Status Missing(const std::string& path) {
  return absl::NotFoundError(
      absl::StrCat("input file '", path, "' does not exist"));
}

// The error for `name` in the open directory `dir_fd` (`at` is its path),
// which cannot be opened as a directory (`file` false) or a regular file.
absl::Status Refused(int dir_fd, const std::string& name, const std::string& at,
                     bool file) {
  struct stat st;
  if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
      S_ISLNK(st.st_mode)) {
    return NotPlain(at, "a symbolic link");
  }
  return NotPlain(at, file ? "not a regular file" : "not a directory");
}

// The directory that holds `file`'s last segment, opened from `directory`
// one segment at a time, each relative to the one before and never through
// a symbolic link (O_NOFOLLOW), so no segment can be swapped for a link
// between a check and its use. With `create`, missing directories on the
// way are made; without, a missing one is NOT_FOUND for the whole `path`.
absl::StatusOr<UniqueFd> OpenBlockDir(const std::string& directory,
                                      const std::string& file,
                                      const std::string& path, bool create) {
  UniqueFd dir(::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() < 0) {
    if (errno == ENOENT && !create) return Missing(path);
    return FileError("open directory", directory, errno);
  }
  std::vector<std::string> parts = absl::StrSplit(file, '/');
  std::string at = directory;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    at = absl::StrCat(at, "/", parts[i]);
    const char* name = parts[i].c_str();
    if (create && ::mkdirat(dir.get(), name, 0755) != 0 && errno != EEXIST) {
      return FileError("create directory", at, errno);
    }
    UniqueFd next(::openat(dir.get(), name,
                           O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (next.get() < 0) {
      const int err = errno;
      if (err == ENOTDIR || err == ELOOP) {
        return Refused(dir.get(), parts[i], at, /*file=*/false);
      }
      if (err == ENOENT) return Missing(path);
      return FileError("open directory", at, err);
    }
    dir = std::move(next);
  }
  return dir;
}

// The last segment of `file`.
std::string BaseName(const std::string& file) {
  const size_t slash = file.rfind('/');
  return slash == std::string::npos ? file : file.substr(slash + 1);
}

// Reads the block file `name` of the open directory `dir_fd`; `path` names
// it in errors. O_NONBLOCK: a FIFO in its place is refused at once rather
// than waited on for a writer.
absl::StatusOr<Tensor> ReadBlockFile(int dir_fd, const std::string& name,
                                     const std::string& path) {
  UniqueFd fd(::openat(dir_fd, name.c_str(),
                       O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (fd.get() < 0) {
    const int err = errno;
    if (err == ENOENT) return Missing(path);
    if (err == ELOOP) return Refused(dir_fd, name, path, /*file=*/true);
    return FileError("open", path, err);
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return FileError("inspect", path, errno);
  if (!S_ISREG(st.st_mode)) return NotPlain(path, "not a regular file");
  const size_t size = static_cast<size_t>(st.st_size);
  if (size == 0) return ParseNpy("", path);
  // Mapped rather than read: parsing copies the data once, into the tensor.
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd.get(), 0);
  if (map == MAP_FAILED) return FileError("read", path, errno);
  absl::StatusOr<Tensor> t =
      ParseNpy(absl::string_view(static_cast<const char*>(map), size), path);
  ::munmap(map, size);
  return t;
}

}  // namespace

absl::StatusOr<std::string> CheckpointPath(const std::string& directory,
                                           const std::string& file) {
  if (directory.empty() || directory[0] != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint directory '", directory.substr(0, 200),
                     "' must be an absolute path"));
  }
  for (absl::string_view part : absl::StrSplit(directory, '/')) {
    if (part == "." || part == "..") {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint directory '", directory.substr(0, 200),
                       "' must not have '.' or '..' segments"));
    }
  }
  SHARD_RETURN_IF_ERROR(ValidateArrayName(file, "checkpoint block file"));
  return absl::StrCat(directory, "/", file);
}

absl::StatusOr<uint64_t> SaveCheckpointBlock(const ResidentStore& store,
                                             const v1::SaveBlockRequest& r) {
  SHARD_RETURN_IF_ERROR(NoPath(r.path()));
  SHARD_ASSIGN_OR_RETURN(std::string path,
                         CheckpointPath(r.directory(), r.file()));
  SHARD_ASSIGN_OR_RETURN(ResidentStore::Block block,
                         store.Find(r.name(), r.version()));
  SHARD_ASSIGN_OR_RETURN(UniqueFd dir, OpenBlockDir(r.directory(), r.file(),
                                                    path, /*create=*/true));
  const std::string name = BaseName(r.file());
  struct stat st;
  if (::fstatat(dir.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
      !S_ISREG(st.st_mode)) {
    return Refused(dir.get(), name, path, /*file=*/true);
  }
  // The new file is renamed over whatever is in its place by then: a link
  // put there meanwhile is replaced, never followed.
  const Tensor& t = *block.data;
  const std::string header = NpyHeader(t);
  SHARD_RETURN_IF_ERROR(WriteFileAtomicallyAt(
      dir.get(), name, path,
      {header, absl::string_view(reinterpret_cast<const char*>(t.data()),
                                 t.num_bytes())}));
  return Digest(t);
}

absl::Status LoadCheckpointBlock(ResidentStore& store,
                                 const v1::LoadBlockRequest& r) {
  SHARD_RETURN_IF_ERROR(NoPath(r.path()));
  SHARD_RETURN_IF_ERROR(ValidateArrayName(r.name()));
  SHARD_ASSIGN_OR_RETURN(std::string path,
                         CheckpointPath(r.directory(), r.file()));
  SHARD_ASSIGN_OR_RETURN(Mesh mesh, MeshFromProto(r.mesh()));
  SHARD_ASSIGN_OR_RETURN(ArrayMeta meta, HeaderFromProto(r.header(), r.name()));
  SHARD_ASSIGN_OR_RETURN(BlockLayout layout,
                         BlockLayout::Create(mesh, SpecFromProto(r.spec()),
                                             meta.shape, "its spec", r.name()));
  if (r.device() < 0 || r.device() >= mesh.num_devices()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device ", r.device(), " is not a device of mesh ", mesh.ToString()));
  }
  SHARD_ASSIGN_OR_RETURN(UniqueFd dir, OpenBlockDir(r.directory(), r.file(),
                                                    path, /*create=*/false));
  absl::StatusOr<Tensor> read =
      ReadBlockFile(dir.get(), BaseName(r.file()), path);
  if (read.status().code() == absl::StatusCode::kInvalidArgument) {
    return absl::DataLossError(absl::StrCat(
        "checkpoint file ", path, " is damaged: ", read.status().message()));
  }
  if (!read.ok()) return read.status();
  Tensor t = *std::move(read);
  if (Digest(t) != r.digest()) {
    return absl::DataLossError(
        absl::StrCat("checkpoint file ", path, " does not match its checksum"));
  }
  if (t.shape() != layout.block_shape() || t.dtype() != meta.dtype) {
    return absl::DataLossError(absl::StrCat(
        "checkpoint file ", path, " holds ", ShapeString(t.dtype(), t.shape()),
        ", not the block ", ShapeString(meta.dtype, layout.block_shape())));
  }
  ResidentStore::Block b;
  b.version = r.version();
  b.device = r.device();
  b.box = Box{layout.BlockOrigin(r.device()), t.shape()};
  b.layout = ResidentStore::ArrayLayout{meta, mesh, SpecFromProto(r.spec())};
  b.data = std::make_shared<Tensor>(std::move(t));
  return store.Put(r.name(), std::move(b));
}

}  // namespace shardmap
