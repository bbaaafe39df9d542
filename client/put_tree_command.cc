// shardctl put-tree: every array of a .npz becomes a resident array,
// sharded by the first rule whose filter matches its key.
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/array_command_util.h"
#include "client/commands.h"
#include "client/exit_codes.h"
#include "client/resident_display.h"
#include "client/tree_rules.h"
#include "core/array_name.h"
#include "core/block_math.h"
#include "core/npz.h"
#include "core/status_util.h"

namespace shardmap {

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
}  // namespace shardmap
