// shardctl put, get, ls and rm: resident arrays (named arrays that live on
// the workers).
#include <algorithm>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/array_command_util.h"
#include "client/array_format.h"
#include "client/commands.h"
#include "client/exit_codes.h"
#include "client/output_file.h"
#include "client/resident_display.h"
#include "client/tree_rules.h"
#include "core/block_math.h"
#include "core/npy.h"
#include "core/status_util.h"
#include "wire/proto_convert.h"

namespace shardmap {
namespace {

constexpr int64_t kMaxJsonValues = 100000;

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

int ReadError(const absl::Status& s, bool json) {
  return ReportError(
      s, s.code() == absl::StatusCode::kNotFound ? kExitNoInput : kExitDataErr,
      json);
}

// The spec of the first of `rules` (--rules) that matches `name`.
absl::StatusOr<PartitionSpec> SpecByRules(const std::string& rules,
                                          const std::string& name) {
  auto parsed = ParseTreeRules(rules);
  if (!parsed.ok()) return Annotate(parsed.status(), "--rules");
  auto rule = MatchTreeRule(*parsed, name);
  if (!rule.ok()) return Annotate(rule.status(), "--rules");
  return (*parsed)[*rule].spec;
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
  auto spec = f.rules.empty() ? ParseArraySpec(f.spec, "--spec")
                              : SpecByRules(f.rules, name);
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

}  // namespace shardmap
