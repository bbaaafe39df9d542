#include "server/checkpoint.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "absl/strings/str_cat.h"
#include "core/block_math.h"
#include "core/status_util.h"

namespace shardmap {
namespace {

namespace fs = std::filesystem;

std::string RandomSuffix() {
  std::random_device rd;
  return absl::StrCat(rd() % 1000000);
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

absl::Status FileError(const std::string& what, const fs::path& path,
                       const std::error_code& ec) {
  return absl::InternalError(
      absl::StrCat("cannot ", what, " ", path.string(), ": ", ec.message()));
}

}  // namespace

absl::StatusOr<std::vector<ResidentArray>> SaveCheckpoint(
    const std::string& directory, const ResidentIndex& index,
    WorkerCalls& calls) {
  if (directory.empty()) {
    return absl::InvalidArgumentError("checkpoint directory is empty");
  }
  const fs::path dir = fs::absolute(directory);
  const fs::path tmp = dir.string() + ".tmp-" + RandomSuffix();
  std::error_code ec;
  fs::create_directories(tmp / "arrays", ec);
  if (ec) return FileError("create", tmp, ec);
  auto cleanup = [&] { fs::remove_all(tmp, ec); };

  nlohmann::json manifest;
  manifest["format"] = "shardmap-checkpoint-v1";
  manifest["arrays"] = nlohmann::json::array();
  std::vector<ResidentArray> saved;
  for (const ResidentArray& a : index.All()) {
    auto live = index.Find(a.name);  // refuses lost arrays
    if (!live.ok()) {
      cleanup();
      return live.status();
    }
    auto layout =
        BlockLayout::Create(a.mesh, a.spec, a.meta.shape, "its spec", a.name);
    if (!layout.ok()) {
      cleanup();
      return layout.status();
    }
    const fs::path array_dir = tmp / "arrays" / a.name;
    fs::create_directories(array_dir, ec);
    if (ec) {
      cleanup();
      return FileError("create", array_dir, ec);
    }
    nlohmann::json blocks = nlohmann::json::array();
    for (const auto& [block, device] : Representatives(a, *layout)) {
      const std::string file = absl::StrCat("block-", block, ".npy");
      v1::SaveBlockRequest request;
      request.set_name(a.name);
      request.set_version(a.version);
      request.set_path((array_dir / file).string());
      auto digest = calls.SaveBlock(a.addresses[device], request);
      if (!digest.ok()) {
        cleanup();
        return Annotate(digest.status(),
                        absl::StrCat("saving '", a.name, "' block ", block));
      }
      blocks.push_back({{"block", block},
                        {"file", file},
                        {"digest", absl::StrCat(*digest)}});
    }
    manifest["arrays"].push_back({{"name", a.name},
                                  {"dtype", DTypeName(a.meta.dtype)},
                                  {"shape", a.meta.shape},
                                  {"mesh", a.mesh.ToString()},
                                  {"spec", a.spec.ToString()},
                                  {"blocks", blocks}});
    saved.push_back(a);
  }
  {
    std::ofstream out(tmp / "manifest.json");
    out << manifest.dump(2) << "\n";
    if (!out) {
      cleanup();
      return absl::InternalError(
          absl::StrCat("cannot write ", (tmp / "manifest.json").string()));
    }
  }
  // Replace the old checkpoint: move it aside, move the new one in, then
  // delete the old. A crash leaves either the old or the new one whole.
  const fs::path old = dir.string() + ".old-" + RandomSuffix();
  const bool had_old = fs::exists(dir);
  if (had_old) {
    fs::rename(dir, old, ec);
    if (ec) {
      cleanup();
      return FileError("move aside", dir, ec);
    }
  }
  fs::rename(tmp, dir, ec);
  if (ec) return FileError("rename into place", tmp, ec);
  if (had_old) fs::remove_all(old, ec);
  return saved;
}

absl::StatusOr<std::vector<ResidentArray>> RestoreCheckpoint(
    const std::string& directory, ResidentIndex& index, const WorkerPool& pool,
    WorkerCalls& calls) {
  const fs::path dir = fs::absolute(directory);
  std::ifstream in(dir / "manifest.json");
  if (!in) {
    return absl::NotFoundError(absl::StrCat("no checkpoint at ", dir.string(),
                                            " (manifest.json is missing)"));
  }
  nlohmann::json manifest;
  try {
    in >> manifest;
  } catch (const nlohmann::json::exception& e) {
    return absl::DataLossError(absl::StrCat("checkpoint manifest ",
                                            (dir / "manifest.json").string(),
                                            " is malformed: ", e.what()));
  }
  std::vector<ResidentArray> restored;
  try {
    for (const auto& entry : manifest.at("arrays")) {
      ResidentArray a;
      a.name = entry.at("name").get<std::string>();
      SHARD_ASSIGN_OR_RETURN(a.meta.dtype,
                             ParseDType(entry.at("dtype").get<std::string>()));
      a.meta.shape = entry.at("shape").get<Shape>();
      SHARD_ASSIGN_OR_RETURN(a.mesh,
                             Mesh::Parse(entry.at("mesh").get<std::string>()));
      SHARD_ASSIGN_OR_RETURN(
          a.spec, PartitionSpec::Parse(entry.at("spec").get<std::string>()));
      SHARD_ASSIGN_OR_RETURN(BlockLayout layout,
                             BlockLayout::Create(a.mesh, a.spec, a.meta.shape,
                                                 "its spec", a.name));
      std::map<int64_t, uint64_t> digests;
      std::map<int64_t, std::string> files;
      for (const auto& b : entry.at("blocks")) {
        const int64_t block = b.at("block").get<int64_t>();
        digests[block] = std::stoull(b.at("digest").get<std::string>());
        files[block] = b.at("file").get<std::string>();
      }
      SHARD_ASSIGN_OR_RETURN(auto workers, pool.Acquire(a.mesh.num_devices()));
      a.version = index.NextVersion();
      for (int64_t d = 0; d < a.mesh.num_devices(); ++d) {
        const int64_t block = layout.BlockNumber(d);
        if (files.count(block) == 0) {
          return absl::DataLossError(absl::StrCat("checkpoint has no block ",
                                                  block, " of '", a.name, "'"));
        }
        v1::LoadBlockRequest request;
        request.set_name(a.name);
        request.set_version(a.version);
        request.set_path((dir / "arrays" / a.name / files[block]).string());
        request.set_digest(digests[block]);
        *request.mutable_mesh() = MeshToProto(a.mesh);
        *request.mutable_spec() = SpecToProto(a.spec);
        *request.mutable_header() = HeaderToProto(a.meta.dtype, a.meta.shape);
        request.set_device(d);
        SHARD_RETURN_IF_ERROR(calls.LoadBlock(workers[d].address, request));
        a.worker_ids.push_back(workers[d].id);
        a.addresses.push_back(workers[d].address);
      }
      index.Commit(a);
      restored.push_back(std::move(a));
    }
  } catch (const nlohmann::json::exception& e) {
    return absl::DataLossError(absl::StrCat("checkpoint manifest ",
                                            (dir / "manifest.json").string(),
                                            " is malformed: ", e.what()));
  }
  return restored;
}

}  // namespace shardmap
