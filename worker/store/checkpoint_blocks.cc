#include "worker/store/checkpoint_blocks.h"

#include <sys/stat.h>

#include <cerrno>

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

// Walks `file`'s segments under `directory`: each must be a directory (or,
// the last, a regular file), never a symbolic link. With `create`, missing
// directories on the way are made.
absl::Status CheckInside(const std::string& directory, const std::string& file,
                         bool create) {
  std::string at = directory;
  std::vector<std::string> parts = absl::StrSplit(file, '/');
  for (size_t i = 0; i < parts.size(); ++i) {
    const bool last = i + 1 == parts.size();
    at = absl::StrCat(at, "/", parts[i]);
    struct stat st;
    if (::lstat(at.c_str(), &st) != 0) {
      if (errno == ENOENT && (last || !create)) return absl::OkStatus();
      if (errno != ENOENT) return FileError("inspect", at, errno);
      if (::mkdir(at.c_str(), 0755) != 0 && errno != EEXIST) {
        return FileError("create directory", at, errno);
      }
      continue;
    }
    if (S_ISLNK(st.st_mode)) {
      return absl::DataLossError(absl::StrCat(
          "checkpoint path ", at,
          " is a symbolic link; a checkpoint holds only plain files"));
    }
    if (!last && !S_ISDIR(st.st_mode)) {
      return absl::DataLossError(
          absl::StrCat("checkpoint path ", at, " is not a directory"));
    }
    // A FIFO or device in a block's place would block or stream forever.
    if (last && !S_ISREG(st.st_mode)) {
      return absl::DataLossError(absl::StrCat(
          "checkpoint path ", at,
          " is not a regular file; a checkpoint holds only plain files"));
    }
  }
  return absl::OkStatus();
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
  SHARD_RETURN_IF_ERROR(CheckInside(r.directory(), r.file(), /*create=*/true));
  const Tensor& t = *block.data;
  const std::string header = NpyHeader(t);
  SHARD_RETURN_IF_ERROR(WriteFileAtomically(
      path, {header, absl::string_view(reinterpret_cast<const char*>(t.data()),
                                       t.num_bytes())}));
  return Digest(t);
}

absl::Status LoadCheckpointBlock(ResidentStore& store,
                                 const v1::LoadBlockRequest& r) {
  SHARD_RETURN_IF_ERROR(NoPath(r.path()));
  SHARD_RETURN_IF_ERROR(ValidateArrayName(r.name()));
  SHARD_ASSIGN_OR_RETURN(std::string path,
                         CheckpointPath(r.directory(), r.file()));
  SHARD_RETURN_IF_ERROR(CheckInside(r.directory(), r.file(), /*create=*/false));
  SHARD_ASSIGN_OR_RETURN(Mesh mesh, MeshFromProto(r.mesh()));
  SHARD_ASSIGN_OR_RETURN(ArrayMeta meta, HeaderFromProto(r.header(), r.name()));
  SHARD_ASSIGN_OR_RETURN(BlockLayout layout,
                         BlockLayout::Create(mesh, SpecFromProto(r.spec()),
                                             meta.shape, "its spec", r.name()));
  if (r.device() < 0 || r.device() >= mesh.num_devices()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device ", r.device(), " is not a device of mesh ", mesh.ToString()));
  }
  absl::StatusOr<Tensor> read = ReadNpy(path);
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
  b.data = std::make_shared<const Tensor>(std::move(t));
  return store.Put(r.name(), std::move(b));
}

}  // namespace shardmap
