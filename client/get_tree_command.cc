// shardctl get-tree PREFIX FILE.npz: the inverse of put-tree. Every resident
// array named PREFIX/KEY is fetched (assembled from its blocks) and written
// to the .npz as member KEY, bit for bit; put-tree of that file with the
// same rules gives back the same arrays.
#include <CLI/CLI.hpp>
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
#include "core/npz.h"
#include "core/status_util.h"

namespace shardmap {

CLI::App* AddGetTreeCommand(CLI::App& app, GetTreeFlags& f) {
  CLI::App* cmd = app.add_subcommand(
      "get-tree",
      "write every resident array PREFIX/KEY to an .npz as member KEY (the "
      "inverse of put-tree)");
  cmd->add_option("PREFIX", f.prefix, "name prefix, e.g. mlp")->required();
  cmd->add_option("FILE", f.file, "the .npz to write (replaced atomically)")
      ->required();
  cmd->add_option("--coordinator", f.coordinator, "coordinator HOST:PORT")
      ->capture_default_str();
  cmd->add_flag("--json", f.json, "machine-readable output");
  return cmd;
}

int GetTreeCommand(const GetTreeFlags& f) {
  std::string prefix = ArrayName(f.prefix);
  while (absl::EndsWith(prefix, "/")) prefix.pop_back();
  if (!absl::EndsWith(f.file, ".npz")) {
    return ReportError(absl::InvalidArgumentError(absl::StrCat(
                           "FILE '", f.file, "' must end in .npz")),
                       kExitUsage, f.json);
  }
  auto client = Connect(f.coordinator);
  if (!client.ok()) return ReportError(client.status(), kExitUsage, f.json);
  const std::string under = prefix.empty() ? "" : prefix + "/";
  auto listed = (*client)->List(under);
  if (!listed.ok()) {
    return ReportError(listed.status(), ArrayExitCode(listed.status()), f.json);
  }
  std::vector<std::string> names, lost;
  for (const v1::ResidentInfo& info : *listed) {
    if (!absl::StartsWith(info.name(), under)) continue;
    (info.lost() ? lost : names).push_back(info.name());
  }
  if (!lost.empty()) {
    return ReportError(
        absl::FailedPreconditionError(absl::StrCat(
            "resident arrays under '", prefix,
            "' were lost with a worker: ", absl::StrJoin(lost, ", "),
            "; put or restore them again (nothing was written)")),
        kExitUnavailable, f.json);
  }
  if (names.empty()) {
    return ReportError(absl::NotFoundError(absl::StrCat(
                           "no resident arrays are named ", under, "...")),
                       kExitDataErr, f.json);
  }
  std::vector<Tensor> arrays;
  for (const std::string& name : names) {
    auto t = (*client)->Get(name);
    if (!t.ok()) {
      return ReportError(Annotate(t.status(), name), ArrayExitCode(t.status()),
                         f.json);
    }
    arrays.push_back(*std::move(t));
  }
  std::vector<std::pair<std::string, const Tensor*>> members;
  nlohmann::json list = nlohmann::json::array();
  std::vector<std::vector<std::string>> rows = {{"NAME", "KEY", "ARRAY"}};
  uint64_t bytes = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string key = names[i].substr(under.size());
    const Tensor& t = arrays[i];
    members.emplace_back(key, &t);
    bytes += t.num_bytes();
    list.push_back({{"name", names[i]},
                    {"key", key},
                    {"dtype", DTypeName(t.dtype())},
                    {"shape", t.shape()}});
    rows.push_back({names[i], key, ShapeString(t.dtype(), t.shape())});
  }
  if (absl::Status s = WriteNpz(f.file, members, /*compress=*/false); !s.ok()) {
    return ReportError(s, kExitCantCreate, f.json);
  }
  if (f.json) {
    std::cout << nlohmann::json{{"file", f.file}, {"arrays", list}}.dump()
              << std::endl;
  } else {
    std::cerr << FormatTable(rows) << "wrote " << names.size() << " arrays ("
              << bytes << " bytes) to " << f.file << std::endl;
  }
  return kExitOk;
}

}  // namespace shardmap
