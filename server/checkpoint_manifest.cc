#include "server/checkpoint_manifest.h"

#include <nlohmann/json.hpp>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/array_name.h"
#include "core/bounded_json.h"
#include "core/status_util.h"
#include "wire/proto_convert.h"

namespace shardmap {
namespace {

using json = nlohmann::json;

// Deeper nesting than a manifest has is refused before it is built.
constexpr int kMaxDepth = 8;

// Reads one field of an array entry, turning every way it can be wrong
// into DATA_LOSS naming the file and the field.
class Fields {
 public:
  explicit Fields(absl::string_view file) : file_(file) {}

  absl::Status Error(absl::string_view field, absl::string_view why) const {
    return absl::DataLossError(
        absl::StrCat("checkpoint manifest ", file_, ": ", field, ": ", why));
  }

  absl::StatusOr<std::string> String(const json& object,
                                     absl::string_view field,
                                     const std::string& where) const {
    const std::string path = absl::StrCat(where, field);
    auto it = object.find(std::string(field));
    if (it == object.end()) return Error(path, "is missing");
    if (!it->is_string()) return Error(path, "must be a string");
    return it->get<std::string>();
  }

  absl::StatusOr<const json*> List(const json& object, absl::string_view field,
                                   const std::string& where) const {
    const std::string path = absl::StrCat(where, field);
    auto it = object.find(std::string(field));
    if (it == object.end()) return Error(path, "is missing");
    if (!it->is_array()) return Error(path, "must be a list");
    return &*it;
  }

  absl::StatusOr<int64_t> Integer(const json& value,
                                  const std::string& path) const {
    if (value.is_number_unsigned() &&
        value.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX)) {
      return static_cast<int64_t>(value.get<uint64_t>());
    }
    if (value.is_number_integer() && !value.is_number_unsigned()) {
      return value.get<int64_t>();
    }
    return Error(path, "must be an integer");
  }

  // A status from a parser (dtype, mesh...) as DATA_LOSS on `path`.
  absl::Status Wrap(const absl::Status& s, const std::string& path) const {
    return Error(path, s.message());
  }

 private:
  const std::string file_;
};

absl::StatusOr<CheckpointArray> ParseArray(const Fields& f, const json& entry,
                                           int version, size_t index) {
  const std::string where = absl::StrCat("arrays[", index, "].");
  if (!entry.is_object()) {
    return f.Error(absl::StrCat("arrays[", index, "]"), "must be an object");
  }
  CheckpointArray a;
  SHARD_ASSIGN_OR_RETURN(a.name, f.String(entry, "name", where));
  if (absl::Status s = ValidateArrayName(a.name); !s.ok()) {
    return f.Wrap(s, where + "name");
  }
  SHARD_ASSIGN_OR_RETURN(std::string dtype, f.String(entry, "dtype", where));
  auto parsed_dtype = ParseDType(dtype);
  if (!parsed_dtype.ok()) return f.Wrap(parsed_dtype.status(), where + "dtype");
  SHARD_ASSIGN_OR_RETURN(const json* shape, f.List(entry, "shape", where));
  Shape dims;
  for (size_t i = 0; i < shape->size(); ++i) {
    SHARD_ASSIGN_OR_RETURN(
        int64_t dim,
        f.Integer((*shape)[i], absl::StrCat(where, "shape[", i, "]")));
    dims.push_back(dim);
  }
  auto meta = HeaderFromProto(HeaderToProto(*parsed_dtype, dims), "the array");
  if (!meta.ok()) return f.Wrap(meta.status(), where + "shape");
  a.meta = *meta;
  SHARD_ASSIGN_OR_RETURN(std::string mesh, f.String(entry, "mesh", where));
  auto parsed_mesh = Mesh::Parse(mesh);
  if (!parsed_mesh.ok()) return f.Wrap(parsed_mesh.status(), where + "mesh");
  a.mesh = *parsed_mesh;
  SHARD_ASSIGN_OR_RETURN(std::string spec, f.String(entry, "spec", where));
  auto parsed_spec = PartitionSpec::Parse(spec);
  if (!parsed_spec.ok()) return f.Wrap(parsed_spec.status(), where + "spec");
  a.spec = *parsed_spec;
  auto layout =
      BlockLayout::Create(a.mesh, a.spec, a.meta.shape, "its spec", a.name);
  if (!layout.ok()) return f.Wrap(layout.status(), where + "spec");
  std::set<int64_t> wanted;
  for (int64_t d = 0; d < a.mesh.num_devices(); ++d) {
    wanted.insert(layout->BlockNumber(d));
  }

  SHARD_ASSIGN_OR_RETURN(const json* blocks, f.List(entry, "blocks", where));
  for (size_t i = 0; i < blocks->size(); ++i) {
    const json& b = (*blocks)[i];
    const std::string at = absl::StrCat(where, "blocks[", i, "].");
    if (!b.is_object()) {
      return f.Error(absl::StrCat(where, "blocks[", i, "]"),
                     "must be an object");
    }
    auto number = b.find("block");
    if (number == b.end()) return f.Error(at + "block", "is missing");
    SHARD_ASSIGN_OR_RETURN(int64_t block, f.Integer(*number, at + "block"));
    if (wanted.count(block) == 0) {
      return f.Error(at + "block",
                     absl::StrCat(block, " is not a block of ", spec, " over ",
                                  mesh, " (0 to ", wanted.size() - 1, ")"));
    }
    if (a.digests.count(block) > 0) {
      return f.Error(at + "block", absl::StrCat("block ", block, " repeats"));
    }
    const std::string generated =
        CheckpointBlockFile(version, index, a.name, block);
    SHARD_ASSIGN_OR_RETURN(std::string file, f.String(b, "file", at));
    // v1 wrote the file relative to the array's directory.
    const std::string expected =
        version == 1 ? absl::StrCat("block-", block, ".npy") : generated;
    if (file != expected) {
      return f.Error(at + "file", absl::StrCat("is '", file.substr(0, 80),
                                               "', not '", expected, "'"));
    }
    SHARD_ASSIGN_OR_RETURN(std::string digest, f.String(b, "digest", at));
    uint64_t value = 0;
    if (digest.empty() || digest.size() > 20 ||
        digest.find_first_not_of("0123456789") != std::string::npos ||
        !absl::SimpleAtoi(digest, &value)) {
      return f.Error(at + "digest",
                     absl::StrCat("'", digest.substr(0, 40),
                                  "' is not a decimal 64-bit number"));
    }
    a.digests[block] = value;
    a.files[block] = generated;
  }
  for (int64_t block : wanted) {
    if (a.digests.count(block) == 0) {
      return f.Error(where + "blocks", absl::StrCat("block ", block, " of '",
                                                    a.name, "' is missing"));
    }
  }
  return a;
}

// The JSON object of a manifest, its nesting bounded.
absl::StatusOr<json> ParseRoot(const Fields& f, absl::string_view text) {
  absl::StatusOr<json> root = ParseBoundedJson(text, kMaxDepth);
  if (!root.ok()) return f.Error("(file)", root.status().message());
  if (!root->is_object()) return f.Error("(file)", "must be a JSON object");
  return root;
}

}  // namespace

std::string CheckpointBlockFile(int version, size_t index,
                                const std::string& name, int64_t block) {
  if (version == 1)
    return absl::StrCat("arrays/", name, "/block-", block, ".npy");
  return absl::StrCat("blocks/", index, "-", block, ".npy");
}

absl::StatusOr<CheckpointManifest> ParseCheckpointManifest(
    absl::string_view text, absl::string_view file) {
  const Fields f(file);
  if (text.size() > kMaxManifestBytes) {
    return f.Error("(file)",
                   absl::StrCat("is ", text.size(), " bytes; at most ",
                                kMaxManifestBytes));
  }
  SHARD_ASSIGN_OR_RETURN(json root, ParseRoot(f, text));
  CheckpointManifest manifest;
  SHARD_ASSIGN_OR_RETURN(std::string format, f.String(root, "format", ""));
  if (format == kCheckpointFormatV1) {
    manifest.version = 1;
  } else if (format != kCheckpointFormatV2) {
    return f.Error("format",
                   absl::StrCat("'", format.substr(0, 80), "' is not '",
                                kCheckpointFormatV2, "' (or '",
                                kCheckpointFormatV1, "')"));
  }
  SHARD_ASSIGN_OR_RETURN(const json* arrays, f.List(root, "arrays", ""));
  std::set<std::string> names;
  for (size_t i = 0; i < arrays->size(); ++i) {
    SHARD_ASSIGN_OR_RETURN(CheckpointArray a,
                           ParseArray(f, (*arrays)[i], manifest.version, i));
    if (!names.insert(a.name).second) {
      return f.Error(absl::StrCat("arrays[", i, "].name"),
                     absl::StrCat("'", a.name, "' repeats"));
    }
    manifest.arrays.push_back(std::move(a));
  }
  return manifest;
}

bool IsCheckpointManifest(absl::string_view text) {
  const Fields f("");
  auto root = ParseRoot(f, text);
  if (!root.ok()) return false;
  auto format = f.String(*root, "format", "");
  return format.ok() &&
         (*format == kCheckpointFormatV1 || *format == kCheckpointFormatV2);
}

std::string SerializeCheckpointManifest(const CheckpointManifest& manifest) {
  json arrays = json::array();
  for (size_t i = 0; i < manifest.arrays.size(); ++i) {
    const CheckpointArray& a = manifest.arrays[i];
    json blocks = json::array();
    for (const auto& [block, digest] : a.digests) {
      blocks.push_back({{"block", block},
                        {"file", CheckpointBlockFile(2, i, a.name, block)},
                        {"digest", absl::StrCat(digest)}});
    }
    arrays.push_back({{"name", a.name},
                      {"dtype", DTypeName(a.meta.dtype)},
                      {"shape", a.meta.shape},
                      {"mesh", a.mesh.ToString()},
                      {"spec", a.spec.ToString()},
                      {"blocks", blocks}});
  }
  const json root = {{"format", kCheckpointFormatV2}, {"arrays", arrays}};
  return root.dump(2) + "\n";
}

}  // namespace shardmap
