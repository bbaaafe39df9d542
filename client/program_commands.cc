// shardctl plan, register and unregister: expression programs and job
// plans, as the coordinator checks them.
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "client/commands.h"
#include "client/exit_codes.h"
#include "client/run_request.h"
#include "client/shard_client.h"
#include "wire/proto_convert.h"

namespace shardmap {
namespace {

// Far above the coordinator's own limit on a program's size, which then
// says how far over it the source is.
constexpr std::streamsize kMaxSourceFileBytes = 1 << 20;

nlohmann::json ArrayJson(const v1::PlannedArray& a) {
  nlohmann::json j = {{"role", a.role()},
                      {"spec", SpecFromProto(a.spec()).ToString()}};
  if (a.has_global()) {
    auto global = HeaderFromProto(a.global(), a.role());
    auto block = HeaderFromProto(a.block(), a.role());
    if (global.ok() && block.ok()) {
      j["dtype"] = DTypeName(global->dtype);
      j["shape"] = global->shape;
      j["block_shape"] = block->shape;
    }
  }
  if (!a.resident_name().empty()) j["resident"] = a.resident_name();
  return j;
}

nlohmann::json PlanJson(const v1::PlanResponse& plan) {
  nlohmann::json j;
  j["function"] = plan.function();
  j["inputs"] = nlohmann::json::array();
  for (const auto& a : plan.inputs()) j["inputs"].push_back(ArrayJson(a));
  j["outputs"] = nlohmann::json::array();
  for (const auto& a : plan.outputs()) j["outputs"].push_back(ArrayJson(a));
  // Per device; -1 where a native function's figure is unknown.
  j["per_device"] = {
      {"flops", plan.flops_per_device()},
      {"collective_bytes_sent", plan.collective_bytes_sent()},
      {"collective_bytes_received", plan.collective_bytes_received()},
      {"scatter_bytes", plan.scatter_bytes_per_device()},
      {"gather_bytes", plan.gather_bytes_per_device()},
      {"peak_bytes", plan.peak_bytes_per_device()}};
  j["text"] = plan.text();
  return j;
}

}  // namespace

absl::StatusOr<std::string> ProgramSource(const std::string& expr,
                                          const std::string& file,
                                          int* exit_code) {
  if (!expr.empty() && !file.empty()) {
    return absl::InvalidArgumentError(
        "give one of --expr and --expr-file, not both");
  }
  if (file.empty()) return expr;
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    *exit_code = kExitNoInput;
    return absl::NotFoundError(
        absl::StrCat("--expr-file ", file, ": cannot open it"));
  }
  std::string source(kMaxSourceFileBytes + 1, '\0');
  in.read(source.data(), kMaxSourceFileBytes + 1);
  if (in.bad()) {
    *exit_code = kExitNoInput;
    return absl::NotFoundError(
        absl::StrCat("--expr-file ", file, ": cannot read it"));
  }
  source.resize(in.gcount());
  if (static_cast<std::streamsize>(source.size()) > kMaxSourceFileBytes) {
    *exit_code = kExitDataErr;
    return absl::InvalidArgumentError(absl::StrCat(
        "--expr-file ", file, " is over ", kMaxSourceFileBytes, " bytes"));
  }
  if (source.empty()) {
    *exit_code = kExitDataErr;
    return absl::InvalidArgumentError(
        absl::StrCat("--expr-file ", file, " is empty"));
  }
  return source;
}

int PlanCommand(const RunFlags& f) {
  int exit_code = kExitUsage;
  auto parsed = ParseRun(f, &exit_code);
  if (!parsed.ok()) return ReportError(parsed.status(), exit_code, f.json);
  auto connection = ConnectForJob(f, &exit_code);
  if (!connection.ok()) {
    return ReportError(connection.status(), exit_code, f.json);
  }
  auto plan = connection->client->Plan(parsed->job);
  if (!plan.ok()) {
    return ReportError(plan.status(), ExitCodeForStatus(plan.status()), f.json);
  }
  if (f.json) {
    std::cout << PlanJson(*plan).dump() << std::endl;
  } else {
    std::cout << plan->text();
  }
  return kExitOk;
}

int RegisterCommand(const ProgramFlags& f) {
  int exit_code = kExitUsage;
  auto source = ProgramSource(f.expr, f.expr_file, &exit_code);
  if (!source.ok()) return ReportError(source.status(), exit_code, f.json);
  if (source->empty()) {
    return ReportError(absl::InvalidArgumentError(
                           "give the program: --expr SOURCE or --expr-file "
                           "FILE"),
                       kExitUsage, f.json);
  }
  auto client = ShardClient::Create({f.coordinator});
  if (!client.ok()) return ReportError(client.status(), kExitUsage, f.json);
  auto registered = (*client)->RegisterProgram(f.name, *source, f.replace);
  if (!registered.ok()) {
    return ReportError(registered.status(),
                       ExitCodeForStatus(registered.status()), f.json);
  }
  const v1::FunctionSignature& fn = registered->function();
  if (f.json) {
    std::cout << nlohmann::json{{"name", fn.name()},
                                {"arity", fn.arity()},
                                {"outputs", fn.num_outputs()},
                                {"persisted", registered->persisted()}}
                     .dump()
              << std::endl;
    return kExitOk;
  }
  std::cerr << "registered " << fn.name() << ": " << fn.doc()
            << (registered->persisted()
                    ? ""
                    : " (kept in the coordinator's memory only: it has no "
                      "--data-dir)")
            << std::endl;
  return kExitOk;
}

int UnregisterCommand(const ProgramFlags& f) {
  auto client = ShardClient::Create({f.coordinator});
  if (!client.ok()) return ReportError(client.status(), kExitUsage, f.json);
  absl::Status s = (*client)->UnregisterProgram(f.name);
  if (!s.ok()) return ReportError(s, ExitCodeForStatus(s), f.json);
  if (f.json) {
    std::cout << nlohmann::json{{"unregistered", f.name}}.dump() << std::endl;
  } else {
    std::cerr << "unregistered " << f.name << std::endl;
  }
  return kExitOk;
}

}  // namespace shardmap
