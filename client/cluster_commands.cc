// shardctl up, status and functions.
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/commands.h"
#include "client/exit_codes.h"
#include "client/local_cluster.h"
#include "client/shard_client.h"
#include "core/bounded_input.h"
#include "core/status_util.h"
#include "ops/signals.h"
#include "wire/signature.h"

namespace shardmap {

int UpCommand(const UpFlags& f) {
  if (f.workers < 1) {
    return ReportError(absl::InvalidArgumentError(absl::StrCat(
                           "--workers must be at least 1, got ", f.workers)),
                       kExitUsage, false);
  }
  BlockTerminationSignals();
  LocalCluster::Options options;
  options.num_workers = f.workers;
  options.listen = f.listen;
  options.log_level = f.log_level;
  options.security = f.security;
  if (f.insecure) options.coordinator_args.push_back("--insecure");
  auto cluster = LocalCluster::Start(options);
  if (!cluster.ok())
    return ReportError(cluster.status(), kExitUnavailable, false);
  std::cout << (*cluster)->address() << std::endl;
  if (!(*cluster)->token_file().empty()) {
    std::cerr << "token: " << (*cluster)->token_file()
              << " (shardctl on this machine finds it; elsewhere use "
                 "--token-file or SHARDMAP_TOKEN)"
              << std::endl;
  }
  std::cerr << "shardmap cluster ready: coordinator at "
            << (*cluster)->address() << " with " << f.workers << " worker"
            << (f.workers == 1 ? "" : "s") << "; Ctrl-C stops it" << std::endl;
  WaitForTerminationSignal();
  std::cerr << "stopping" << std::endl;
  return kExitOk;
}

int StatusCommand(const QueryFlags& f) {
  auto client = ShardClient::Create({f.coordinator});
  if (!client.ok()) return ReportError(client.status(), kExitUsage, f.json);
  auto status = (*client)->Status();
  if (!status.ok()) {
    return ReportError(status.status(), ExitCodeForStatus(status.status()),
                       f.json);
  }
  if (f.json) {
    nlohmann::json j;
    j["coordinator"] = f.coordinator;
    j["version"] = status->version();
    j["jobs_completed"] = status->jobs_completed();
    j["jobs_failed"] = status->jobs_failed();
    j["jobs_running"] = status->jobs_running();
    j["jobs_waiting"] = status->jobs_waiting();
    j["expected_workers"] = status->expected_workers();
    j["complete"] = status->complete();
    j["workers"] = nlohmann::json::array();
    for (const auto& w : status->workers()) {
      nlohmann::json wj = {
          {"id", w.worker_id()},
          {"address", w.address()},
          {"seconds_since_heartbeat", w.seconds_since_heartbeat()}};
      if (w.has_rank()) wj["rank"] = w.rank();
      if (w.draining()) wj["draining"] = true;
      j["workers"].push_back(wj);
    }
    std::cout << j.dump() << std::endl;
    return kExitOk;
  }
  std::cout << "coordinator " << f.coordinator << " (shardmap "
            << status->version() << "): " << status->workers_size()
            << " live worker" << (status->workers_size() == 1 ? "" : "s")
            << ", " << status->jobs_completed() << " jobs completed, "
            << status->jobs_failed() << " failed, " << status->jobs_running()
            << " running, " << status->jobs_waiting() << " waiting\n";
  for (const auto& w : status->workers()) {
    std::cout << absl::StrFormat(
        "  %-4s %-22s %slast heartbeat %.1fs ago\n", w.worker_id(), w.address(),
        w.has_rank() ? absl::StrCat("rank ", w.rank(), "  ") : "",
        w.seconds_since_heartbeat());
  }
  return kExitOk;
}

int FunctionsCommand(const QueryFlags& f) {
  auto client = ShardClient::Create({f.coordinator});
  if (!client.ok()) return ReportError(client.status(), kExitUsage, f.json);
  auto functions = (*client)->ListFunctions();
  if (!functions.ok()) {
    return ReportError(functions.status(),
                       ExitCodeForStatus(functions.status()), f.json);
  }
  if (f.json) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& fn : *functions) {
      nlohmann::json kwargs = nlohmann::json::array();
      for (const auto& k : fn.kwargs()) {
        nlohmann::json kj = {
            {"name", k.name()}, {"type", k.type()}, {"required", k.required()}};
        if (!k.required()) {
          // The coordinator's text; kept as a string if it is not JSON.
          auto value = ParseJson(k.default_json(), "a keyword's default");
          kj["default"] =
              value.ok() ? *std::move(value) : nlohmann::json(k.default_json());
        }
        kwargs.push_back(kj);
      }
      list.push_back({{"name", fn.name()},
                      {"signature", SignatureText(fn)},
                      {"arity", fn.arity()},
                      {"outputs", fn.num_outputs()},
                      {"kwargs", kwargs},
                      {"doc", fn.doc()}});
      if (!fn.program().empty()) list.back()["program"] = fn.program();
      if (!fn.origin().empty()) list.back()["origin"] = fn.origin();
      if (fn.workers_size() > 0) {
        list.back()["workers"] =
            std::vector<std::string>(fn.workers().begin(), fn.workers().end());
      }
    }
    std::cout << nlohmann::json{{"functions", list}}.dump() << std::endl;
    return kExitOk;
  }
  std::map<std::string, int> variants;  // a name the workers disagree on
  for (const auto& fn : *functions) ++variants[fn.name()];
  for (const auto& fn : *functions) {
    if (fn.program().empty()) {
      // Plugins say where they come from; built-ins are the default.
      std::string origin;
      if (!fn.origin().empty() && fn.origin() != "builtin") {
        origin = absl::StrCat("  [", fn.origin(), "]");
      }
      if (variants[fn.name()] > 1) {
        absl::StrAppend(&origin, "  (on ", absl::StrJoin(fn.workers(), ", "),
                        ")");
      }
      std::cout << absl::StrFormat("%-36s %s%s\n", SignatureText(fn), fn.doc(),
                                   origin);
      continue;
    }
    // A registered program: its parameters and its source's first line.
    std::string first = fn.program().substr(0, fn.program().find('\n'));
    if (first.size() > 60) first = first.substr(0, 57) + "...";
    const size_t open = fn.doc().find('(');
    const std::string params =
        open == std::string::npos ? "" : fn.doc().substr(open);
    std::cout << absl::StrFormat("%-36s program: %s\n",
                                 absl::StrCat(fn.name(), params), first);
  }
  return kExitOk;
}

}  // namespace shardmap
