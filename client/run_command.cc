// shardctl run: reads .npy arguments, runs one job (on a given coordinator
// or on a local cluster started for it), writes or prints the outputs.
#include <unistd.h>

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/array_format.h"
#include "client/commands.h"
#include "client/exit_codes.h"
#include "client/local_cluster.h"
#include "client/shard_client.h"
#include "core/npy.h"
#include "core/signature.h"
#include "core/status_util.h"

namespace shardmap {
namespace {

struct ParsedRun {
  JobRequest job;
  std::vector<Tensor> inputs;
};

// Everything shardctl can check before it talks to anyone. Returns the
// exit code on failure through *exit_code.
absl::StatusOr<ParsedRun> ParseRun(const RunFlags& f, int* exit_code) {
  *exit_code = kExitUsage;
  if (!f.expr.empty()) {
    *exit_code = kExitUsage;
    return absl::UnimplementedError(
        "--expr programs are not available yet; use --fn with a built-in "
        "function (see `shardctl functions`)");
  }
  if (f.fn.empty()) return absl::InvalidArgumentError("--fn is required");
  if (f.coordinator.empty() == (f.local == 0)) {
    return absl::InvalidArgumentError(
        "give exactly one of --coordinator HOST:PORT or --local N");
  }
  if (f.local < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--local must be at least 1, got ", f.local));
  }
  ParsedRun run;
  run.job.function = f.fn;
  auto mesh = Mesh::Parse(f.mesh);
  if (!mesh.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--mesh: ", mesh.status().message()));
  }
  run.job.mesh = *mesh;
  if (!f.args.empty() && f.in_specs.empty()) {
    return absl::InvalidArgumentError(
        "--in-spec is required: give one per --arg, or one for all");
  }
  if (f.in_specs.size() > 1 && f.in_specs.size() != f.args.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "got ", f.args.size(), " --arg but ", f.in_specs.size(),
        " --in-spec; give one --in-spec per --arg, or one for all"));
  }
  for (size_t i = 0; i < f.in_specs.size(); ++i) {
    auto spec = PartitionSpec::Parse(f.in_specs[i]);
    if (!spec.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--in-spec ", i, ": ", spec.status().message()));
    }
    run.job.in_specs.push_back(*spec);
  }
  if (f.out_specs.empty()) {
    return absl::InvalidArgumentError(
        "--out-spec is required: give one per output (P() for a replicated "
        "output)");
  }
  if (!f.outs.empty() && f.outs.size() != f.out_specs.size() &&
      f.out_specs.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("got ", f.outs.size(), " --out but ", f.out_specs.size(),
                     " --out-spec; give one --out-spec per --out"));
  }
  for (size_t i = 0; i < f.out_specs.size(); ++i) {
    auto spec = PartitionSpec::Parse(f.out_specs[i]);
    if (!spec.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--out-spec ", i, ": ", spec.status().message()));
    }
    run.job.out_specs.push_back(*spec);
  }
  auto kwargs = ParseKwargs(f.kwargs);
  if (!kwargs.ok()) return kwargs.status();
  run.job.kwargs_json = f.kwargs;
  run.job.check_rep = !f.no_check_rep;
  run.job.timeout = absl::Seconds(f.timeout_seconds);
  for (const std::string& path : f.args) {
    auto t = ReadNpy(path);
    if (!t.ok()) {
      *exit_code = t.status().code() == absl::StatusCode::kNotFound
                       ? kExitNoInput
                       : kExitDataErr;
      return t.status();
    }
    run.inputs.push_back(*std::move(t));
  }
  for (const Tensor& t : run.inputs) run.job.args.push_back(&t);
  return run;
}

}  // namespace

int ReportError(const absl::Status& status, int exit_code, bool json) {
  std::cerr << "error: " << StatusCodeName(status.code()) << ": "
            << status.message() << std::endl;
  if (json) {
    nlohmann::json j;
    j["error"] = {{"code", StatusCodeName(status.code())},
                  {"message", std::string(status.message())},
                  {"exit_code", exit_code}};
    std::cout << j.dump() << std::endl;
  }
  return exit_code;
}

int RunCommand(const RunFlags& f) {
  int exit_code = kExitUsage;
  auto parsed = ParseRun(f, &exit_code);
  if (!parsed.ok()) return ReportError(parsed.status(), exit_code, f.json);
  // The pointers in job.args refer to parsed->inputs; keep them in place.
  ParsedRun& run = *parsed;

  std::unique_ptr<LocalCluster> cluster;
  std::string address = f.coordinator;
  if (f.local > 0) {
    LocalCluster::Options options;
    options.num_workers = f.local;
    auto started = LocalCluster::Start(options);
    if (!started.ok()) {
      return ReportError(started.status(), kExitUnavailable, f.json);
    }
    cluster = *std::move(started);
    address = cluster->address();
  }
  auto client = ShardClient::Create({address});
  if (!client.ok()) return ReportError(client.status(), kExitUsage, f.json);
  const absl::Time start = absl::Now();
  auto result = (*client)->Run(run.job);
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  if (!result.ok()) {
    return ReportError(result.status(), ExitCodeForStatus(result.status()),
                       f.json);
  }
  if (!f.outs.empty() && f.outs.size() != result->outputs.size()) {
    return ReportError(
        absl::InvalidArgumentError(absl::StrCat(
            f.fn, " returned ", result->outputs.size(), " outputs but ",
            f.outs.size(), " --out files were given")),
        kExitUsage, f.json);
  }
  nlohmann::json summary;
  summary["job_id"] = result->job_id;
  summary["function"] = f.fn;
  summary["mesh"] = run.job.mesh.ToString();
  summary["devices"] = result->num_devices;
  summary["seconds"] = seconds;
  summary["outputs"] = nlohmann::json::array();
  for (size_t i = 0; i < result->outputs.size(); ++i) {
    const Tensor& t = result->outputs[i];
    nlohmann::json o = {{"dtype", DTypeName(t.dtype())}, {"shape", t.shape()}};
    if (i < f.outs.size()) {
      if (absl::Status s = WriteNpy(f.outs[i], t); !s.ok()) {
        return ReportError(s, kExitCantCreate, f.json);
      }
      o["file"] = f.outs[i];
    } else if (f.json && t.num_elements() <= 100000) {
      o["values"] = ArrayToJson(t);
    }
    summary["outputs"].push_back(o);
  }
  if (f.json) {
    std::cout << summary.dump() << std::endl;
    return kExitOk;
  }
  std::cerr << result->job_id << ": " << f.fn << " on mesh "
            << run.job.mesh.ToString() << " (" << result->num_devices
            << " devices) in " << absl::StrFormat("%.1f", seconds * 1e3)
            << " ms" << std::endl;
  for (size_t i = 0; i < result->outputs.size(); ++i) {
    const Tensor& t = result->outputs[i];
    if (i < f.outs.size()) {
      std::cerr << "output " << i << ": " << ShapeString(t.dtype(), t.shape())
                << " -> " << f.outs[i] << std::endl;
    } else {
      std::cout << FormatArray(t) << std::endl;
    }
  }
  return kExitOk;
}

}  // namespace shardmap
