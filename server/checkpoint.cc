#include "server/checkpoint.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <random>
#include <set>

#include "absl/strings/str_cat.h"
#include "core/atomic_file.h"
#include "core/block_math.h"
#include "core/error_reason.h"
#include "core/status_util.h"
#include "server/checkpoint_manifest.h"
#include "wire/proto_convert.h"

namespace shardmap {
namespace {

namespace fs = std::filesystem;

std::string RandomSuffix() {
  std::random_device rd;
  return absl::StrCat(rd() % 1000000);
}

absl::Status FsError(absl::string_view what, const fs::path& path,
                     const std::error_code& ec) {
  return FileError(what, path.string(), ec.value());
}

absl::Status Refuse(const fs::path& dir, absl::string_view why) {
  return WithReason(
      absl::FailedPreconditionError(absl::StrCat(
          "refusing to save into ", dir.string(), ": it ", why,
          "; give a new or empty directory, or an earlier checkpoint to "
          "replace")),
      kReasonCheckpointDirRefused);
}

// Reads a manifest (bounded), NOT_FOUND if there is none.
absl::StatusOr<std::string> ReadManifest(const fs::path& file) {
  absl::StatusOr<std::string> text =
      ReadSmallFile(file.string(), kMaxManifestBytes);
  if (absl::IsNotFound(text.status())) {
    return absl::NotFoundError(
        absl::StrCat("no checkpoint at ", file.parent_path().string(), " (",
                     file.filename().string(), " is missing)"));
  }
  if (absl::IsInvalidArgument(text.status())) {
    return absl::DataLossError(
        absl::StrCat("checkpoint manifest ", text.status().message()));
  }
  return text;
}

// OK if `dir` may be replaced by a new checkpoint: it does not exist, or
// is an empty directory, or is a checkpoint (a manifest shardmap wrote
// and nothing but a checkpoint's entries). FAILED_PRECONDITION otherwise.
absl::Status CheckReplaceable(const fs::path& dir) {
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(dir, ec);
  if (!fs::exists(st)) return absl::OkStatus();
  if (fs::is_symlink(st)) return Refuse(dir, "is a symbolic link");
  if (!fs::is_directory(st)) return Refuse(dir, "is not a directory");
  static const std::set<std::string> kEntries = {"manifest.json", "arrays",
                                                 "blocks"};
  bool empty = true;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    empty = false;
    if (kEntries.count(entry.path().filename().string()) == 0) {
      return Refuse(dir,
                    absl::StrCat("holds ", entry.path().filename().string(),
                                 ", which is not part of a checkpoint"));
    }
  }
  if (ec) return FsError("list", dir, ec);
  if (empty) return absl::OkStatus();
  auto text = ReadManifest(dir / "manifest.json");
  if (!text.ok() || !IsCheckpointManifest(*text)) {
    return Refuse(dir, "is not a shardmap checkpoint (no readable manifest)");
  }
  return absl::OkStatus();
}

// Moves the finished checkpoint `tmp` to `dir`, replacing what CheckReplaceable
// allowed. Both checkpoints stay whole throughout, but a crash between the
// two renames leaves the old one at `dir`.old-XXXX and nothing at `dir`:
// it is not put back by itself.
absl::Status Publish(const fs::path& tmp, const fs::path& dir) {
  std::error_code ec;
  const fs::path old = dir.string() + ".old-" + RandomSuffix();
  const bool had_old = fs::exists(fs::symlink_status(dir, ec));
  if (had_old) {
    fs::rename(dir, old, ec);
    if (ec) return FsError("move aside", dir, ec);
  }
  fs::rename(tmp, dir, ec);
  if (ec) {
    absl::Status s = FsError("rename into place", tmp, ec);
    if (had_old) fs::rename(old, dir, ec);  // put the old one back
    return s;
  }
  SHARD_RETURN_IF_ERROR(SyncDirectory(dir.parent_path().string()));
  if (had_old) fs::remove_all(old, ec);
  return absl::OkStatus();
}

// The device whose block stands for each distinct block of `a`.
std::map<int64_t, int64_t> Representatives(const ResidentArray& a,
                                           const BlockLayout& layout) {
  std::map<int64_t, int64_t> rep;
  for (int64_t d = 0; d < a.mesh.num_devices(); ++d) {
    rep.emplace(layout.BlockNumber(d), d);
  }
  return rep;
}

absl::StatusOr<std::vector<ResidentArray>> WriteBlocks(
    const fs::path& tmp, const ResidentIndex& index, WorkerCalls& calls,
    absl::Time deadline, CheckpointManifest* manifest) {
  std::vector<ResidentArray> saved;
  for (const ResidentArray& a : index.All()) {
    SHARD_RETURN_IF_ERROR(index.Find(a.name).status());  // refuses lost ones
    SHARD_ASSIGN_OR_RETURN(
        BlockLayout layout,
        BlockLayout::Create(a.mesh, a.spec, a.meta.shape, "its spec", a.name));
    CheckpointArray entry{a.name, a.meta, a.mesh, a.spec, {}, {}};
    const size_t position = manifest->arrays.size();
    for (const auto& [block, device] : Representatives(a, layout)) {
      v1::SaveBlockRequest request;
      request.set_name(a.name);
      request.set_version(a.version);
      request.set_directory(tmp.string());
      request.set_file(CheckpointBlockFile(2, position, a.name, block));
      auto digest = calls.SaveBlock(a.addresses[device], request, deadline);
      if (!digest.ok()) {
        return Annotate(digest.status(),
                        absl::StrCat("saving '", a.name, "' block ", block));
      }
      entry.digests[block] = *digest;
    }
    manifest->arrays.push_back(std::move(entry));
    saved.push_back(a);
  }
  return saved;
}

}  // namespace

absl::StatusOr<std::vector<ResidentArray>> SaveCheckpoint(
    const std::string& directory, const ResidentIndex& index,
    WorkerCalls& calls, absl::Time deadline) {
  if (directory.empty()) {
    return absl::InvalidArgumentError("checkpoint directory is empty");
  }
  fs::path dir = fs::absolute(directory).lexically_normal();
  if (!dir.has_filename()) dir = dir.parent_path();  // a trailing '/'
  if (dir == dir.root_path()) {
    return absl::InvalidArgumentError("cannot save into the root directory");
  }
  SHARD_RETURN_IF_ERROR(CheckReplaceable(dir));
  const fs::path tmp = dir.string() + ".tmp-" + RandomSuffix();
  std::error_code ec;
  fs::create_directories(tmp / "blocks", ec);
  if (ec) return FsError("create", tmp, ec);
  CheckpointManifest manifest;
  auto saved = WriteBlocks(tmp, index, calls, deadline, &manifest);
  absl::Status s = saved.status();
  if (s.ok()) {
    const std::string text = SerializeCheckpointManifest(manifest);
    s = WriteFileAtomically((tmp / "manifest.json").string(), {text});
  }
  if (s.ok()) s = SyncDirectory((tmp / "blocks").string());
  if (s.ok()) s = Publish(tmp, dir);
  if (!s.ok()) {
    fs::remove_all(tmp, ec);
    return s;
  }
  return saved;
}

absl::StatusOr<std::vector<ResidentArray>> RestoreCheckpoint(
    const std::string& directory, ResidentIndex& index, const WorkerPool& pool,
    WorkerCalls& calls, absl::Time deadline) {
  const fs::path dir = fs::absolute(directory).lexically_normal();
  const fs::path file = dir / "manifest.json";
  SHARD_ASSIGN_OR_RETURN(std::string text, ReadManifest(file));
  SHARD_ASSIGN_OR_RETURN(CheckpointManifest manifest,
                         ParseCheckpointManifest(text, file.string()));
  // Every block is loaded before any array is published: a failed restore
  // publishes nothing.
  std::vector<ResidentArray> restored;
  for (const CheckpointArray& entry : manifest.arrays) {
    ResidentArray a;
    a.name = entry.name;
    a.meta = entry.meta;
    a.mesh = entry.mesh;
    a.spec = entry.spec;
    SHARD_ASSIGN_OR_RETURN(
        BlockLayout layout,
        BlockLayout::Create(a.mesh, a.spec, a.meta.shape, "its spec", a.name));
    SHARD_ASSIGN_OR_RETURN(auto workers, pool.Acquire(a.mesh.num_devices()));
    a.version = index.NextVersion();
    for (int64_t d = 0; d < a.mesh.num_devices(); ++d) {
      const int64_t block = layout.BlockNumber(d);
      v1::LoadBlockRequest request;
      request.set_name(a.name);
      request.set_version(a.version);
      request.set_directory(dir.string());
      request.set_file(entry.files.at(block));
      request.set_digest(entry.digests.at(block));
      *request.mutable_mesh() = MeshToProto(a.mesh);
      *request.mutable_spec() = SpecToProto(a.spec);
      *request.mutable_header() = HeaderToProto(a.meta.dtype, a.meta.shape);
      request.set_device(d);
      SHARD_RETURN_IF_ERROR(
          calls.LoadBlock(workers[d].address, request, deadline));
      a.worker_ids.push_back(workers[d].id);
      a.addresses.push_back(workers[d].address);
    }
    restored.push_back(std::move(a));
  }
  for (const ResidentArray& a : restored) {
    // As after a job's commit (server/resident_commit.h): the workers that
    // still keep blocks of the versions replaced drop them.
    for (const ResidentIndex::Superseded& old : index.Commit(a)) {
      absl::Status s =
          calls.DropArray(old.address, a.name, deadline, old.version);
      if (!s.ok()) {
        spdlog::warn(
            "could not tell worker {} to drop '{}' blocks a restore "
            "replaced: {}",
            old.address, a.name, std::string(s.message()));
      }
    }
  }
  return restored;
}

}  // namespace shardmap
