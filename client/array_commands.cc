// shardctl put, get, ls, rm, put-tree, save and restore: resident arrays
// (named arrays that live on the workers) and their checkpoints.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/array_format.h"
#include "client/commands.h"
#include "client/exit_codes.h"
#include "client/output_file.h"
#include "client/shard_client.h"
#include "client/tree_rules.h"
#include "core/array_name.h"
#include "core/block_math.h"
#include "core/error_reason.h"
#include "core/npy.h"
#include "core/npz.h"
#include "core/status_util.h"
#include "wire/proto_convert.h"

namespace shardmap {
namespace {

constexpr int64_t kMaxJsonValues = 100000;

// A resident array's name as typed: a leading '@' (as in `run --arg @w`)
// is dropped.
std::string ArrayName(const std::string& text) {
  return absl::StartsWith(text, "@") ? text.substr(1) : text;
}

// NOT_FOUND for a resident array is bad input data (65), not the unknown
// function ExitCodeForStatus assumes (64).
int ArrayExitCode(const absl::Status& s) {
  return s.code() == absl::StatusCode::kNotFound ? kExitDataErr
                                                 : ExitCodeForStatus(s);
}

std::string ArrayText(const v1::ResidentInfo& info) {
  auto meta = HeaderFromProto(info.header(), info.name());
  return meta.ok() ? ShapeString(meta->dtype, meta->shape) : "?";
}

std::string MeshText(const v1::Mesh& proto) {
  auto mesh = MeshFromProto(proto);
  return mesh.ok() ? mesh->ToString() : "?";
}

nlohmann::json InfoJson(const v1::ResidentInfo& info) {
  nlohmann::json j = {{"name", info.name()}};
  if (auto meta = HeaderFromProto(info.header(), info.name()); meta.ok()) {
    j["dtype"] = DTypeName(meta->dtype);
    j["shape"] = meta->shape;
  }
  j["mesh"] = MeshText(info.mesh());
  j["spec"] = SpecFromProto(info.spec()).ToString();
  j["version"] = info.version();
  j["bytes"] = info.bytes();
  j["lost"] = info.lost();
  j["workers"] = std::vector<std::string>(info.worker_ids().begin(),
                                          info.worker_ids().end());
  return j;
}

nlohmann::json InfosJson(const std::vector<v1::ResidentInfo>& infos) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& info : infos) list.push_back(InfoJson(info));
  return list;
}

// Columns padded to their widest cell; rows[0] is the header.
std::string FormatTable(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    width.resize(std::max(width.size(), row.size()));
    for (size_t c = 0; c < row.size(); ++c) {
      width[c] = std::max(width[c], row[c].size());
    }
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      absl::StrAppend(&line, c == 0 ? "" : "  ",
                      c + 1 == row.size()
                          ? row[c]
                          : absl::StrFormat("%-*s", width[c], row[c]));
    }
    absl::StrAppend(&out, line, "\n");
  }
  return out;
}

std::string InfoTable(const std::vector<v1::ResidentInfo>& infos) {
  std::vector<std::vector<std::string>> rows = {
      {"NAME", "ARRAY", "MESH", "SPEC", "VERSION", "BYTES", "STATUS"}};
  for (const auto& info : infos) {
    rows.push_back({info.name(), ArrayText(info), MeshText(info.mesh()),
                    SpecFromProto(info.spec()).ToString(),
                    absl::StrCat(info.version()), absl::StrCat(info.bytes()),
                    info.lost() ? "LOST" : "ok"});
  }
  return FormatTable(rows);
}

uint64_t TotalBytes(const std::vector<v1::ResidentInfo>& infos) {
  uint64_t total = 0;
  for (const auto& info : infos) total += info.bytes();
  return total;
}

// The description of the array `name` in `existing` if it has another
// dtype, shape or sharding than `t` sharded by `spec` over `mesh` (putting
// `t` there needs --overwrite).
std::optional<std::string> Conflict(
    const std::vector<v1::ResidentInfo>& existing, const std::string& name,
    const Tensor& t, const Mesh& mesh, const PartitionSpec& spec) {
  for (const auto& info : existing) {
    if (info.name() != name) continue;
    auto meta = HeaderFromProto(info.header(), name);
    auto info_mesh = MeshFromProto(info.mesh());
    const PartitionSpec info_spec = SpecFromProto(info.spec());
    if (!meta.ok() || meta->dtype != t.dtype() || meta->shape != t.shape() ||
        !info_mesh.ok() ||
        !SameSharding(*info_mesh, info_spec, mesh, spec, t.shape().size())) {
      return absl::StrCat(ArrayText(info), " sharded ", info_spec.ToString(),
                          " over ", MeshText(info.mesh()));
    }
  }
  return std::nullopt;
}

// The exit code of a failed put of `t` as `name`: 73 (cannot create the
// output) when an array of another dtype, shape or sharding holds the
// name, as opposed to a lost worker (69).
int PutExitCode(const ShardClient& client, const absl::Status& s,
                const std::string& name, const Tensor& t, const Mesh& mesh,
                const PartitionSpec& spec) {
  if (s.code() == absl::StatusCode::kFailedPrecondition) {
    auto existing = client.List(name);
    if (existing.ok() && Conflict(*existing, name, t, mesh, spec).has_value()) {
      return kExitCantCreate;
    }
  }
  return ArrayExitCode(s);
}

absl::StatusOr<PartitionSpec> ParseArraySpec(const std::string& text,
                                             absl::string_view flag) {
  auto spec = PartitionSpec::Parse(text);
  if (!spec.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": ", spec.status().message()));
  }
  // An array's own sharding: None (unsplit) is the same as P().
  return spec->unsplit() ? PartitionSpec() : *std::move(spec);
}

absl::StatusOr<Mesh> ParseMeshFlag(const std::string& text) {
  auto mesh = Mesh::Parse(text);
  if (!mesh.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--mesh: ", mesh.status().message()));
  }
  return mesh;
}

int ReadError(const absl::Status& s, bool json) {
  return ReportError(
      s, s.code() == absl::StatusCode::kNotFound ? kExitNoInput : kExitDataErr,
      json);
}

absl::StatusOr<std::unique_ptr<ShardClient>> Connect(const std::string& address,
                                                     int retries = 0) {
  ShardClient::Options options;
  options.address = address;
  options.retries = retries;
  return ShardClient::Create(options);
}

}  // namespace

int PutCommand(const PutFlags& f) {
  const std::string name = ArrayName(f.name);
  if (name.empty()) {
    return ReportError(absl::InvalidArgumentError("NAME is empty"), kExitUsage,
                       f.json);
  }
  auto mesh = ParseMeshFlag(f.mesh);
  if (!mesh.ok()) return ReportError(mesh.status(), kExitUsage, f.json);
  auto spec = ParseArraySpec(f.spec, "--spec");
  if (!spec.ok()) return ReportError(spec.status(), kExitUsage, f.json);
  auto t = ReadNpy(f.file);
  if (!t.ok()) return ReadError(t.status(), f.json);
  if (auto layout = BlockLayout::Create(*mesh, *spec, t->shape(), "--spec",
                                        absl::StrCat("array '", name, "'"));
      !layout.ok()) {
    return ReportError(layout.status(), kExitDataErr, f.json);
  }
  auto client = Connect(f.coordinator, f.retries);
  if (!client.ok()) return ReportError(client.status(), kExitUsage, f.json);
  auto info = (*client)->Put(name, *t, *mesh, *spec, f.overwrite, f.call_id);
  if (!info.ok()) {
    return ReportError(
        info.status(),
        PutExitCode(**client, info.status(), name, *t, *mesh, *spec), f.json);
  }
  if (f.json) {
    std::cout << InfoJson(*info).dump() << std::endl;
  } else {
    std::cerr << "put " << name << ": " << ArrayText(*info) << " on mesh "
              << MeshText(info->mesh()) << " as "
              << SpecFromProto(info->spec()).ToString() << " (version "
              << info->version() << ", " << info->bytes() << " bytes)"
              << std::endl;
  }
  return kExitOk;
}

int GetCommand(const GetFlags& f) {
  const std::string name = ArrayName(f.name);
  auto client = Connect(f.coordinator);
  if (!client.ok()) return ReportError(client.status(), kExitUsage, f.json);
  auto t = (*client)->Get(name);
  if (!t.ok())
    return ReportError(t.status(), ArrayExitCode(t.status()), f.json);
  nlohmann::json j = {
      {"name", name}, {"dtype", DTypeName(t->dtype())}, {"shape", t->shape()}};
  if (!f.out.empty()) {
    if (absl::Status s = WriteOutputNpy(f.out, *t); !s.ok()) {
      return ReportError(s, kExitCantCreate, f.json);
    }
    j["file"] = f.out;
  }
  if (f.json) {
    if (f.out.empty() && t->num_elements() <= kMaxJsonValues) {
      j["values"] = ArrayToJson(*t);
    }
    std::cout << j.dump() << std::endl;
  } else if (!f.out.empty()) {
    std::cerr << name << ": " << ShapeString(t->dtype(), t->shape()) << " -> "
              << f.out << std::endl;
  } else {
    std::cout << FormatArray(*t) << std::endl;
  }
  return kExitOk;
}

int LsCommand(const LsFlags& f) {
  auto client = Connect(f.coordinator);
  if (!client.ok()) return ReportError(client.status(), kExitUsage, f.json);
  auto infos = (*client)->List(ArrayName(f.prefix));
  if (!infos.ok()) {
    return ReportError(infos.status(), ArrayExitCode(infos.status()), f.json);
  }
  std::sort(infos->begin(), infos->end(),
            [](const auto& a, const auto& b) { return a.name() < b.name(); });
  if (f.json) {
    std::cout << nlohmann::json{{"arrays", InfosJson(*infos)}}.dump()
              << std::endl;
  } else if (infos->empty()) {
    std::cerr << "no resident arrays"
              << (f.prefix.empty() ? ""
                                   : absl::StrCat(" under '", f.prefix, "'"))
              << std::endl;
  } else {
    std::cout << InfoTable(*infos);
  }
  return kExitOk;
}

int RmCommand(const RmFlags& f) {
  auto client = Connect(f.coordinator);
  if (!client.ok()) return ReportError(client.status(), kExitUsage, f.json);
  nlohmann::json removed = nlohmann::json::array();
  for (const std::string& text : f.names) {
    const std::string name = ArrayName(text);
    if (absl::Status s = (*client)->Delete(name); !s.ok()) {
      return ReportError(s, ArrayExitCode(s), f.json);
    }
    removed.push_back(name);
    if (!f.json) std::cerr << "removed " << name << std::endl;
  }
  if (f.json)
    std::cout << nlohmann::json{{"removed", removed}}.dump() << std::endl;
  return kExitOk;
}

namespace {

struct TreeItem {
  std::string key;   // in the .npz
  std::string name;  // PREFIX/key
  size_t rule = 0;
  Tensor array;
};

// Reads the .npz and gives every array its rule; checks everything that
// can be checked before anything is put. Sets *exit_code on failure.
absl::StatusOr<std::vector<TreeItem>> PlanTree(
    const PutTreeFlags& f, const Mesh& mesh, const std::vector<TreeRule>& rules,
    int* exit_code) {
  auto arrays = ReadNpz(f.file, f.max_bytes);
  if (!arrays.ok()) {
    *exit_code = arrays.status().code() == absl::StatusCode::kNotFound
                     ? kExitNoInput
                     : kExitDataErr;
    return arrays.status();
  }
  *exit_code = kExitDataErr;
  if (arrays->empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", f.file, "' holds no arrays"));
  }
  std::string prefix = ArrayName(f.prefix);
  while (absl::EndsWith(prefix, "/")) prefix.pop_back();
  std::vector<TreeItem> items;
  for (auto& [key, array] : *arrays) {
    auto rule = MatchTreeRule(rules, key);
    if (!rule.ok()) return Annotate(rule.status(), f.file);
    TreeItem item;
    item.key = key;
    item.name = prefix.empty() ? key : absl::StrCat(prefix, "/", key);
    // The coordinator would refuse it, after the arrays before it are put.
    if (absl::Status s = ValidateArrayName(item.name); !s.ok()) {
      return Annotate(s, f.file);
    }
    item.rule = *rule;
    if (auto layout = BlockLayout::Create(
            mesh, rules[*rule].spec, array.shape(),
            absl::StrCat("rule '", rules[*rule].filter, "'"),
            absl::StrCat("array '", key, "'"));
        !layout.ok()) {
      return Annotate(layout.status(), f.file);
    }
    item.array = std::move(array);
    items.push_back(std::move(item));
  }
  return items;
}

}  // namespace

int PutTreeCommand(const PutTreeFlags& f) {
  auto mesh = ParseMeshFlag(f.mesh);
  if (!mesh.ok()) return ReportError(mesh.status(), kExitUsage, f.json);
  std::vector<TreeRule> rules;
  for (const std::string& text : f.rules) {
    auto parsed = ParseTreeRules(text);
    if (!parsed.ok()) {
      return ReportError(Annotate(parsed.status(), "--rules"), kExitUsage,
                         f.json);
    }
    rules.insert(rules.end(), parsed->begin(), parsed->end());
  }
  int exit_code = kExitDataErr;
  auto items = PlanTree(f, *mesh, rules, &exit_code);
  if (!items.ok()) return ReportError(items.status(), exit_code, f.json);

  nlohmann::json list = nlohmann::json::array();
  std::vector<std::vector<std::string>> rows = {
      {"NAME", "ARRAY", "SPEC", "RULE"}};
  auto record = [&](const TreeItem& item, const v1::ResidentInfo* info) {
    const Tensor& t = item.array;
    const TreeRule& rule = rules[item.rule];
    nlohmann::json j =
        info != nullptr ? InfoJson(*info) : nlohmann::json{{"name", item.name}};
    j["key"] = item.key;
    j["dtype"] = DTypeName(t.dtype());
    j["shape"] = t.shape();
    j["spec"] = rule.spec.ToString();
    j["rule"] = rule.filter;
    list.push_back(j);
    rows.push_back({item.name, ShapeString(t.dtype(), t.shape()),
                    rule.spec.ToString(), rule.filter});
  };
  if (f.dry_run) {
    for (const TreeItem& item : *items) record(item, nullptr);
    if (f.json) {
      std::cout << nlohmann::json{{"dry_run", true}, {"arrays", list}}.dump()
                << std::endl;
    } else {
      std::cout << FormatTable(rows);
      std::cerr << "dry run: nothing was put" << std::endl;
    }
    return kExitOk;
  }

  auto client = Connect(f.coordinator);
  if (!client.ok()) return ReportError(client.status(), kExitUsage, f.json);
  if (!f.overwrite) {
    // Refuse before putting anything rather than halfway through.
    std::string prefix = ArrayName(f.prefix);
    auto existing = (*client)->List(prefix);
    if (!existing.ok()) {
      return ReportError(existing.status(), ArrayExitCode(existing.status()),
                         f.json);
    }
    std::vector<std::string> clashes;
    for (const TreeItem& item : *items) {
      if (auto other = Conflict(*existing, item.name, item.array, *mesh,
                                rules[item.rule].spec)) {
        clashes.push_back(absl::StrCat(
            item.name, " (", *other, ", new ",
            ShapeString(item.array.dtype(), item.array.shape()), ")"));
      }
    }
    if (!clashes.empty()) {
      return ReportError(
          absl::FailedPreconditionError(absl::StrCat(
              "resident arrays of another dtype, shape or sharding hold ",
              absl::StrJoin(clashes, ", "),
              "; nothing was put (use --overwrite to replace them)")),
          kExitCantCreate, f.json);
    }
  }
  uint64_t bytes = 0;
  for (size_t i = 0; i < items->size(); ++i) {
    const TreeItem& item = (*items)[i];
    auto info = (*client)->Put(item.name, item.array, *mesh,
                               rules[item.rule].spec, f.overwrite);
    if (!info.ok()) {
      return ReportError(
          Annotate(info.status(),
                   absl::StrCat(item.name, " (", i, " of ", items->size(),
                                " arrays were put before it)")),
          PutExitCode(**client, info.status(), item.name, item.array, *mesh,
                      rules[item.rule].spec),
          f.json);
    }
    bytes += info->bytes();
    record(item, &*info);
  }
  if (f.json) {
    std::cout << nlohmann::json{{"arrays", list}}.dump() << std::endl;
  } else {
    std::cerr << FormatTable(rows) << "put " << items->size() << " arrays ("
              << bytes << " bytes) on mesh " << mesh->ToString() << std::endl;
  }
  return kExitOk;
}

namespace {

using CheckpointCall = absl::StatusOr<std::vector<v1::ResidentInfo>> (
    ShardClient::*)(const std::string&) const;

int CheckpointCommand(const CheckpointFlags& f, CheckpointCall call,
                      absl::string_view verb) {
  if (f.directory.empty()) {
    return ReportError(absl::InvalidArgumentError("DIR is empty"), kExitUsage,
                       f.json);
  }
  // The servers resolve the path themselves: give them an absolute one.
  std::error_code ec;
  const std::string dir =
      std::filesystem::absolute(f.directory, ec).lexically_normal().string();
  if (ec) {
    return ReportError(absl::InvalidArgumentError(absl::StrCat(
                           "DIR '", f.directory, "': ", ec.message())),
                       kExitUsage, f.json);
  }
  auto client = Connect(f.coordinator);
  if (!client.ok()) return ReportError(client.status(), kExitUsage, f.json);
  auto infos = ((**client).*call)(dir);
  if (!infos.ok()) {
    const bool missing = verb == "restored" &&
                         infos.status().code() == absl::StatusCode::kNotFound;
    // A damaged or edited checkpoint is bad input data.
    const bool damaged = verb == "restored" &&
                         infos.status().code() == absl::StatusCode::kDataLoss;
    // A DIR save will not replace: like an output file that cannot be
    // created.
    const bool refused =
        ReasonOf(infos.status()) == kReasonCheckpointDirRefused;
    return ReportError(infos.status(),
                       missing   ? kExitNoInput
                       : damaged ? kExitDataErr
                       : refused ? kExitCantCreate
                                 : ExitCodeForStatus(infos.status()),
                       f.json);
  }
  std::sort(infos->begin(), infos->end(),
            [](const auto& a, const auto& b) { return a.name() < b.name(); });
  if (f.json) {
    std::cout << nlohmann::json{{"directory", dir},
                                {"arrays", InfosJson(*infos)}}
                     .dump()
              << std::endl;
    return kExitOk;
  }
  if (!infos->empty()) std::cerr << InfoTable(*infos);
  std::cerr << verb << " " << infos->size() << " resident array"
            << (infos->size() == 1 ? "" : "s") << " (" << TotalBytes(*infos)
            << " bytes) " << (verb == "saved" ? "to " : "from ") << dir
            << std::endl;
  return kExitOk;
}

}  // namespace

int SaveCommand(const CheckpointFlags& f) {
  return CheckpointCommand(f, &ShardClient::Save, "saved");
}

int RestoreCommand(const CheckpointFlags& f) {
  return CheckpointCommand(f, &ShardClient::Restore, "restored");
}

}  // namespace shardmap
