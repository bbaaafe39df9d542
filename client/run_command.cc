// shardctl run: reads .npy arguments (or names resident arrays, @NAME),
// runs one job (on a given coordinator or on a local cluster started for
// it), writes, prints or stores (@NAME) the outputs.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/array_format.h"
#include "client/commands.h"
#include "client/exit_codes.h"
#include "client/local_cluster.h"
#include "client/output_file.h"
#include "client/run_request.h"
#include "client/shard_client.h"
#include "client/state_flags.h"
#include "client/tree_run.h"
#include "core/npy.h"
#include "core/status_util.h"
#include "wire/signature.h"

namespace shardmap {
namespace {

bool IsResident(size_t i, const std::vector<std::string>& names) {
  return i < names.size() && !names[i].empty();
}

// "@NAME" in --arg and --out: a resident array instead of a file.
absl::Status ParseResidentNames(const RunFlags& f, JobRequest* job) {
  auto names = [](const std::vector<std::string>& values,
                  absl::string_view flag,
                  std::vector<std::string>* out) -> absl::Status {
    for (size_t i = 0; i < values.size(); ++i) {
      if (!absl::StartsWith(values[i], "@")) continue;
      if (values[i].size() == 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            flag, " ", i, ": '@' needs a resident array name, e.g. @",
            flag == "--arg" ? "mlp/linear1/kernel" : "result"));
      }
      out->resize(values.size());
      (*out)[i] = values[i].substr(1);
    }
    return absl::OkStatus();
  };
  SHARD_RETURN_IF_ERROR(names(f.args, "--arg", &job->resident_args));
  SHARD_RETURN_IF_ERROR(names(f.outs, "--out", &job->resident_outputs));
  job->overwrite = f.overwrite;
  job->donate_args = f.donate;
  return absl::OkStatus();
}

// --mesh, else SHARDMAP_MESH (JAX's set_mesh for the shell), else none:
// the coordinator takes the resident arguments' mesh.
absl::StatusOr<std::optional<Mesh>> JobMeshFlag(const std::string& flag) {
  std::string text = flag, source = "--mesh";
  if (text.empty()) {
    const char* env = std::getenv("SHARDMAP_MESH");
    if (env == nullptr || *env == '\0') return std::optional<Mesh>();
    text = env;
    source = "SHARDMAP_MESH";
  }
  auto mesh = Mesh::Parse(text);
  if (!mesh.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": ", mesh.status().message()));
  }
  return std::optional<Mesh>(*std::move(mesh));
}

}  // namespace

absl::StatusOr<ParsedRun> ParseRun(const RunFlags& f, int* exit_code) {
  *exit_code = kExitUsage;
  ParsedRun run;
  SHARD_ASSIGN_OR_RETURN(run.job.program,
                         ProgramSource(f.expr, f.expr_file, exit_code));
  if (f.fn.empty() == run.job.program.empty()) {
    return absl::InvalidArgumentError(
        "give exactly one of --fn NAME, --expr SOURCE or --expr-file FILE");
  }
  if (f.coordinator.empty() == (f.local == 0)) {
    return absl::InvalidArgumentError(
        "give exactly one of --coordinator HOST:PORT or --local N");
  }
  if (f.local < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--local must be at least 1, got ", f.local));
  }
  run.job.function = f.fn;
  SHARD_ASSIGN_OR_RETURN(run.job.mesh, JobMeshFlag(f.mesh));
  run.job.axis_names = f.axis_names;
  run.job.auto_axes = f.auto_axes;
  const bool trees = UsesTrees(f);
  if (trees) SHARD_RETURN_IF_ERROR(ParseTreeSpecs(f, &run.job));
  if (!trees && f.in_specs.empty()) {
    for (const std::string& arg : f.args) {
      if (absl::StartsWith(arg, "@")) continue;
      return absl::InvalidArgumentError(absl::StrCat(
          "--in-spec is required: give one per --arg, or one for all (it "
          "may be left out only when every --arg is a resident @NAME; '",
          arg, "' is a file)"));
    }
  }
  if (!run.job.mesh.has_value() && f.local > 0) {
    return absl::InvalidArgumentError(
        "--local needs --mesh (or SHARDMAP_MESH): its cluster holds no "
        "resident arrays to take a mesh from");
  }
  if (!trees && f.in_specs.size() > 1 && f.in_specs.size() != f.args.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "got ", f.args.size(), " --arg but ", f.in_specs.size(),
        " --in-spec; give one --in-spec per --arg, or one for all"));
  }
  for (size_t i = 0; !trees && i < f.in_specs.size(); ++i) {
    auto spec = PartitionSpec::Parse(f.in_specs[i]);
    if (!spec.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--in-spec ", i, ": ", spec.status().message()));
    }
    run.job.in_specs.push_back(*spec);
  }
  if (!trees && f.out_specs.empty()) {
    return absl::InvalidArgumentError(
        "--out-spec is required: give one per output (P() for a replicated "
        "output)");
  }
  if (!trees && !f.outs.empty() && f.outs.size() != f.out_specs.size() &&
      f.out_specs.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("got ", f.outs.size(), " --out but ", f.out_specs.size(),
                     " --out-spec; give one --out-spec per --out"));
  }
  for (size_t i = 0; !trees && i < f.out_specs.size(); ++i) {
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
  run.job.traceparent = f.traceparent;
  run.job.call_id = f.call_id;
  SHARD_RETURN_IF_ERROR(ParseResidentNames(f, &run.job));
  SHARD_RETURN_IF_ERROR(ParseStates(f, &run.job));
  const bool resident = !run.job.resident_args.empty() ||
                        !run.job.resident_outputs.empty() ||
                        !run.job.states.empty();
  if (resident && f.local > 0) {
    return absl::InvalidArgumentError(
        "resident arrays (@NAME, --state) live on a running cluster; use "
        "--coordinator HOST:PORT instead of --local");
  }
  if (trees) {
    SHARD_RETURN_IF_ERROR(ReadTreeArgs(f, &run, exit_code));
    return run;
  }
  for (size_t i = 0; i < f.args.size(); ++i) {
    if (IsResident(i, run.job.resident_args)) continue;
    auto t = ReadNpy(f.args[i]);
    if (!t.ok()) {
      *exit_code = t.status().code() == absl::StatusCode::kNotFound
                       ? kExitNoInput
                       : kExitDataErr;
      return t.status();
    }
    run.inputs.push_back(*std::move(t));
  }
  // Pointers into run.inputs, which no longer grows; null for resident
  // arguments.
  for (size_t i = 0, next = 0; i < f.args.size(); ++i) {
    run.job.args.push_back(
        IsResident(i, run.job.resident_args) ? nullptr : &run.inputs[next++]);
  }
  return run;
}

absl::StatusOr<JobConnection> ConnectForJob(const RunFlags& f, int* exit_code) {
  JobConnection c;
  ShardClient::Options options;
  options.address = f.coordinator;
  options.retries = f.retries;
  if (f.local > 0) {
    LocalCluster::Options local;
    local.num_workers = f.local;
    local.security = f.security;
    auto started = LocalCluster::Start(local);
    if (!started.ok()) {
      *exit_code = kExitUnavailable;
      return started.status();
    }
    c.cluster = *std::move(started);
    options.address = c.cluster->address();
    options.security = c.cluster->client_security();
  }
  auto client = ShardClient::Create(options);
  if (!client.ok()) {
    *exit_code = kExitUsage;
    return client.status();
  }
  c.client = *std::move(client);
  return c;
}

namespace {

// Whether a FAILED_PRECONDITION of `job` was a stored output refused over
// an array of another dtype or shape: a target exists (and is not lost),
// and enough workers are live for the pool not to be the cause.
bool OutputConflict(const ShardClient& client, const JobRequest& job) {
  bool exists = false;
  for (const std::string& name : job.resident_outputs) {
    if (name.empty()) continue;
    auto found = client.List(name);
    if (!found.ok()) return false;
    for (const auto& info : *found) {
      exists = exists || (info.name() == name && !info.lost());
    }
  }
  if (!exists) return false;
  auto status = client.Status();
  return status.ok() && (!job.mesh.has_value() ||
                         status->workers_size() >= job.mesh->num_devices());
}

// ExitCodeForStatus, except that a job naming resident arrays gets 65 for
// NOT_FOUND when the function exists (the unknown name is an array's, not
// the function's, 64), and 73 for a stored output refused without
// --overwrite (as put does).
// How a summary names the job's mesh.
std::string MeshText(const JobRequest& job) {
  return job.mesh.has_value() ? job.mesh->ToString()
                              : "of the resident arguments";
}

int RunExitCode(const ShardClient& client, const absl::Status& s,
                const JobRequest& job) {
  const bool names_arrays = !job.resident_args.empty() ||
                            !job.resident_outputs.empty() ||
                            !job.states.empty();
  if (s.code() == absl::StatusCode::kNotFound && names_arrays) {
    auto functions = client.ListFunctions();
    if (functions.ok()) {
      for (const auto& fn : *functions) {
        if (fn.name() == job.function) return kExitDataErr;
      }
    }
  }
  if (s.code() == absl::StatusCode::kFailedPrecondition && !job.overwrite &&
      OutputConflict(client, job)) {
    return kExitCantCreate;
  }
  return ExitCodeForStatus(s);
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

  auto connection = ConnectForJob(f, &exit_code);
  if (!connection.ok()) {
    return ReportError(connection.status(), exit_code, f.json);
  }
  const ShardClient* client = connection->client.get();
  const absl::Time start = absl::Now();
  const std::string what = f.fn.empty() ? "program" : f.fn;
  auto result = client->Run(run.job);
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  if (!result.ok()) {
    return ReportError(result.status(),
                       RunExitCode(*client, result.status(), run.job), f.json);
  }
  const size_t total = result->outputs.size() + result->stored.size();
  if (WritesTreeNpz(f)) {
    if (absl::Status s = WriteTreeOutputs(f.outs[0], *result); !s.ok()) {
      return ReportError(s, kExitCantCreate, f.json);
    }
    return ReportTreeRun(f, run.job, *result, seconds);
  }
  if (!f.outs.empty() && f.outs.size() != total && !StoresTree(f)) {
    return ReportError(absl::InvalidArgumentError(absl::StrCat(
                           what, " returned ", total, " outputs but ",
                           f.outs.size(), " --out were given")),
                       kExitUsage, f.json);
  }
  nlohmann::json summary;
  summary["job_id"] = result->job_id;
  summary["function"] = what;
  summary["mesh"] = MeshText(run.job);
  summary["devices"] = result->num_devices;
  summary["seconds"] = seconds;
  summary["traceparent"] = result->traceparent;
  summary["outputs"] = nlohmann::json::array();
  // One line per output for stderr, or its values for stdout.
  std::vector<std::string> lines;
  std::vector<const Tensor*> printed;
  size_t next_returned = 0, next_stored = 0;
  for (size_t i = 0; i < total; ++i) {
    const bool stored = next_stored < result->stored.size() &&
                        (IsResident(i, run.job.resident_outputs) ||
                         next_returned == result->outputs.size());
    if (stored) {
      const auto& [name, meta] = result->stored[next_stored++];
      summary["outputs"].push_back({{"dtype", DTypeName(meta.dtype)},
                                    {"shape", meta.shape},
                                    {"stored_as", name}});
      lines.push_back(absl::StrCat("output ", i, ": ",
                                   ShapeString(meta.dtype, meta.shape), " -> @",
                                   name));
      continue;
    }
    const Tensor& t = result->outputs[next_returned++];
    nlohmann::json o = {{"dtype", DTypeName(t.dtype())}, {"shape", t.shape()}};
    if (i < f.outs.size()) {
      if (absl::Status s = WriteOutputNpy(f.outs[i], t); !s.ok()) {
        return ReportError(s, kExitCantCreate, f.json);
      }
      o["file"] = f.outs[i];
      lines.push_back(absl::StrCat("output ", i, ": ",
                                   ShapeString(t.dtype(), t.shape()), " -> ",
                                   f.outs[i]));
    } else {
      if (f.json && t.num_elements() <= 100000) o["values"] = ArrayToJson(t);
      printed.push_back(&t);
    }
    summary["outputs"].push_back(o);
  }
  if (!run.job.states.empty()) {
    summary["states"] = nlohmann::json::array();
    for (const JobRequest::State& st : run.job.states) {
      summary["states"].push_back(
          {{"slot", st.slot},
           {"name", st.name},
           {"spec", StateSpecOf(run.job, st).ToString()}});
    }
  }
  if (f.json) {
    std::cout << summary.dump() << std::endl;
    return kExitOk;
  }
  std::cerr << result->job_id << ": " << what << " on mesh "
            << MeshText(run.job) << " (" << result->num_devices
            << " devices) in " << absl::StrFormat("%.1f", seconds * 1e3)
            << " ms" << std::endl;
  for (const JobRequest::State& st : run.job.states) {
    std::cerr << "state " << st.slot << ": @" << st.name << " as "
              << StateSpecOf(run.job, st).ToString() << std::endl;
  }
  for (const std::string& line : lines) std::cerr << line << std::endl;
  for (const Tensor* t : printed) std::cout << FormatArray(*t) << std::endl;
  return kExitOk;
}

}  // namespace shardmap
