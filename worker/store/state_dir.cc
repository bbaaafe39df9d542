#include "worker/store/state_dir.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/array_name.h"
#include "core/atomic_file.h"
#include "core/bounded_json.h"
#include "core/dtype.h"
#include "core/npy.h"

namespace shardmap {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr size_t kPieceBytes = 200;
constexpr char kMeta[] = "current.json";
constexpr uintmax_t kMaxMetaBytes = 1 << 20;

std::string DataFile(uint64_t version) {
  return absl::StrCat("v", version, ".npy");
}

// "v<digits>.npy": a data file of some version.
bool IsDataFile(const std::string& f) {
  uint64_t v;
  return absl::StartsWith(f, "v") && absl::EndsWith(f, ".npy") &&
         absl::SimpleAtoi(f.substr(1, f.size() - 5), &v);
}

// A temporary file of WriteFileAtomically that a crash left behind.
bool IsLeftover(const std::string& f) {
  return absl::StartsWith(f, absl::StrCat(kMeta, ".tmp.")) ||
         (absl::StartsWith(f, "v") && absl::StrContains(f, ".npy.tmp."));
}

absl::Status WriteBlock(const std::string& path, const Tensor& t) {
  const std::string header = NpyHeader(t);
  return WriteFileAtomically(
      path, {header, absl::string_view(reinterpret_cast<const char*>(t.data()),
                                       t.num_bytes())});
}

// The block's array layout in its metadata, if known.
void WriteLayout(const ResidentBlock& b, json* meta) {
  if (!b.layout.has_value()) return;
  (*meta)["dtype"] = DTypeName(b.layout->meta.dtype);
  (*meta)["shape"] = b.layout->meta.shape;
  (*meta)["mesh"] = b.layout->mesh.ToString();
  (*meta)["spec"] = b.layout->spec.ToString();
}

// Reads what WriteLayout wrote; metadata without it (or with a layout
// that does not parse) leaves the block's layout unknown.
void ReadLayout(const json& meta, ResidentBlock* b) {
  if (!meta.contains("mesh") || !meta.contains("spec") ||
      !meta.contains("dtype") || !meta.contains("shape")) {
    return;
  }
  try {
    auto dtype = ParseDType(meta.at("dtype").get<std::string>());
    auto mesh = Mesh::Parse(meta.at("mesh").get<std::string>());
    auto spec = PartitionSpec::Parse(meta.at("spec").get<std::string>());
    if (!dtype.ok() || !mesh.ok() || !spec.ok()) return;
    b->layout = ResidentArrayLayout{
        ArrayMeta{*dtype, meta.at("shape").get<Shape>()}, *mesh, *spec};
  } catch (const json::exception&) {
    b->layout.reset();
  }
}

// One name's persist, for undoing it.
struct Step {
  std::string dir;
  const ResidentBlock* block;
  bool data_existed = false;
  bool data_written = false;
  bool meta_written = false;
  std::optional<std::string> old_meta = std::nullopt;
};

void Undo(const std::vector<Step>& steps) {
  for (const Step& s : steps) {
    const std::string meta = absl::StrCat(s.dir, "/", kMeta);
    absl::Status undone;
    if (s.meta_written) {
      undone = s.old_meta.has_value()
                   ? WriteFileAtomically(meta, {*s.old_meta})
                   : (::unlink(meta.c_str()) == 0
                          ? absl::OkStatus()
                          : FileError("remove", meta, errno));
    }
    if (!undone.ok()) {
      spdlog::error("state dir: cannot restore {}: {}", meta,
                    std::string(undone.message()));
    }
    if (s.data_written && !s.data_existed) {
      ::unlink(absl::StrCat(s.dir, "/", DataFile(s.block->version)).c_str());
    }
  }
}

}  // namespace

std::string StateDir::ArrayDir(const std::string& name) {
  std::string escaped;
  for (char c : name) {
    if (c == '/') {
      escaped += "%2F";
    } else if (c == '%') {
      escaped += "%25";
    } else {
      escaped += c;
    }
  }
  std::string dir = escaped.substr(0, kPieceBytes);
  for (size_t at = kPieceBytes; at < escaped.size(); at += kPieceBytes) {
    absl::StrAppend(&dir, "/%+", escaped.substr(at, kPieceBytes));
  }
  return dir;
}

std::string StateDir::Dir(const std::string& name) const {
  return absl::StrCat(root_, "/arrays/", ArrayDir(name));
}

absl::Status StateDir::Persist(
    const std::vector<std::pair<std::string, const ResidentBlock*>>& blocks) {
  std::vector<Step> steps;
  auto fail = [&steps](absl::Status s) {
    Undo(steps);
    return s;
  };
  // The data first, then the metadata that makes it count: a crash in
  // between leaves the previous versions in effect.
  for (const auto& [name, block] : blocks) {
    Step step{Dir(name), block};
    std::error_code ec;
    fs::create_directories(step.dir, ec);
    if (ec) return fail(FileError("create directory", step.dir, ec.value()));
    const std::string data =
        absl::StrCat(step.dir, "/", DataFile(block->version));
    step.data_existed = fs::exists(data, ec);
    steps.push_back(step);
    absl::Status s = WriteBlock(data, *block->data);
    if (!s.ok()) return fail(s);
    steps.back().data_written = true;
  }
  for (size_t i = 0; i < steps.size(); ++i) {
    Step& step = steps[i];
    const ResidentBlock& b = *step.block;
    const std::string meta = absl::StrCat(step.dir, "/", kMeta);
    if (auto old = ReadSmallFile(meta, kMaxMetaBytes); old.ok()) {
      step.old_meta = *std::move(old);
    }
    json doc = {{"name", blocks[i].first},
                {"version", b.version},
                {"device", b.device},
                {"origin", b.box.origin},
                {"file", DataFile(b.version)}};
    WriteLayout(b, &doc);
    absl::Status s = WriteFileAtomically(meta, {doc.dump()});
    if (!s.ok()) return fail(s);
    step.meta_written = true;
  }
  for (const Step& step : steps) {
    std::error_code ec;
    const std::string keep = DataFile(step.block->version);
    for (const auto& entry : fs::directory_iterator(step.dir, ec)) {
      const std::string f = entry.path().filename().string();
      if (IsDataFile(f) && f != keep) fs::remove(entry.path(), ec);
    }
  }
  return absl::OkStatus();
}

absl::Status StateDir::Remove(const std::string& name) {
  const std::string dir = Dir(name);
  std::error_code ec;
  if (!fs::is_directory(fs::symlink_status(dir, ec))) return absl::OkStatus();
  // The metadata first, so a crash midway leaves no metadata pointing at
  // a missing file.
  const std::string meta = absl::StrCat(dir, "/", kMeta);
  if (::unlink(meta.c_str()) != 0 && errno != ENOENT && errno != ENOTDIR) {
    return FileError("remove", meta, errno);
  }
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string f = entry.path().filename().string();
    std::error_code type_ec;
    if (entry.is_regular_file(type_ec) && (IsDataFile(f) || IsLeftover(f))) {
      fs::remove(entry.path(), ec);
    }
  }
  // Empty directories go, up to the array's first level (a longer name's
  // directories below stay).
  fs::path at = dir;
  const fs::path arrays = fs::path(root_) / "arrays";
  while (at != arrays && at.has_parent_path()) {
    if (::rmdir(at.c_str()) != 0) break;
    at = at.parent_path();
  }
  return SyncDirectory(at.string());
}

void StateDir::Load(std::vector<Loaded>* loaded, std::vector<Bad>* bad) const {
  const fs::path arrays = fs::path(root_) / "arrays";
  std::error_code ec;
  if (!fs::exists(arrays, ec)) return;
  std::vector<fs::path> metas, leftovers;
  for (auto it = fs::recursive_directory_iterator(arrays, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const std::string f = it->path().filename().string();
    if (f == kMeta) metas.push_back(it->path());
    std::error_code type_ec;
    if (IsLeftover(f) && it->is_regular_file(type_ec)) {
      leftovers.push_back(it->path());
    }
  }
  if (ec) {
    bad->push_back(
        {"", arrays.string(), absl::StrCat("cannot list: ", ec.message())});
  }
  for (const fs::path& p : leftovers) fs::remove(p, ec);
  for (const fs::path& meta : metas) {
    std::string name;
    auto reject = [&](const fs::path& path, const std::string& reason) {
      bad->push_back({name, path.string(), reason});
    };
    absl::StatusOr<std::string> text = ReadSmallFile(meta, kMaxMetaBytes);
    if (text.ok() && text->empty()) text = absl::DataLossError("is empty");
    absl::StatusOr<json> doc =
        text.ok() ? ParseBoundedJson(*text, 4) : text.status();
    if (!doc.ok()) {
      reject(meta, std::string(doc.status().message()));
      continue;
    }
    Loaded l;
    std::string file;
    try {
      name = doc->at("name").get<std::string>();
      l.block.version = doc->at("version").get<uint64_t>();
      l.block.device = doc->at("device").get<int64_t>();
      l.block.box.origin = doc->at("origin").get<std::vector<int64_t>>();
      file = doc->at("file").get<std::string>();
    } catch (const json::exception& e) {
      reject(meta, absl::StrCat("malformed metadata: ", e.what()));
      continue;
    }
    if (absl::Status s = ValidateArrayName(name); !s.ok()) {
      reject(meta, std::string(s.message()));
      continue;
    }
    const fs::path expected = arrays / ArrayDir(name);
    if (meta.parent_path() != expected) {
      reject(meta, absl::StrCat("names '", name, "', whose files belong in ",
                                expected.string()));
      continue;
    }
    if (file != DataFile(l.block.version) || l.block.device < 0) {
      reject(meta, absl::StrCat("metadata of '", name, "' does not match ",
                                DataFile(l.block.version)));
      continue;
    }
    const fs::path data = meta.parent_path() / file;
    struct stat st;
    if (::lstat(data.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
      reject(data, "is not a regular file");
      continue;
    }
    absl::StatusOr<Tensor> t = ReadNpy(data.string());
    if (!t.ok()) {
      reject(data, std::string(t.status().message()));
      continue;
    }
    if (t->shape().size() != l.block.box.origin.size()) {
      reject(data, absl::StrCat("holds rank ", t->shape().size(),
                                " but its metadata gives an origin of rank ",
                                l.block.box.origin.size()));
      continue;
    }
    l.name = name;
    ReadLayout(*doc, &l.block);
    l.block.box.shape = t->shape();
    l.block.data = std::make_shared<Tensor>(*std::move(t));
    loaded->push_back(std::move(l));
  }
}

}  // namespace shardmap
