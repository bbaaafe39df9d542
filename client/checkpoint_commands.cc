// shardctl save and restore: checkpoints of every resident array.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "client/array_command_util.h"
#include "client/commands.h"
#include "client/exit_codes.h"
#include "client/resident_display.h"
#include "core/error_reason.h"

namespace shardmap {

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
