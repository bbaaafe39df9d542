#include "client/state_flags.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/tree_rules.h"
#include "core/status_util.h"

namespace shardmap {
namespace {

// Splits "KEY=VALUE" for `flag`.
absl::StatusOr<std::pair<std::string, std::string>> SplitBinding(
    const std::string& text, absl::string_view flag, absl::string_view form) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " '", text, "': expected ", form));
  }
  return std::make_pair(text.substr(0, eq), text.substr(eq + 1));
}

// FLAG SLOT=SPEC: sets `field` (the spec, or out_spec) of the bound slot.
absl::Status ParseSlotSpec(
    const std::string& text, absl::string_view flag,
    std::optional<PartitionSpec> JobRequest::State::*field, JobRequest* job) {
  SHARD_ASSIGN_OR_RETURN(auto kv, SplitBinding(text, flag, "SLOT=SPEC"));
  auto st = std::find_if(
      job->states.begin(), job->states.end(),
      [&](const JobRequest::State& s) { return s.slot == kv.first; });
  if (st == job->states.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": slot '", kv.first,
                     "' is not bound; give --state ", kv.first, "=NAME too"));
  }
  if (((*st).*field).has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": slot '", kv.first, "' has two specs"));
  }
  auto spec = PartitionSpec::Parse(kv.second);
  if (!spec.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " ", kv.first, ": ", spec.status().message()));
  }
  (*st).*field = *std::move(spec);
  return absl::OkStatus();
}

}  // namespace

// --state SLOT=NAME and --state-spec SLOT=SPEC (or SPEC for all).
absl::Status ParseStates(const RunFlags& f, JobRequest* job) {
  for (const std::string& text : f.states) {
    SHARD_ASSIGN_OR_RETURN(auto kv, SplitBinding(text, "--state", "SLOT=NAME"));
    for (const auto& st : job->states) {
      if (st.slot == kv.first) {
        return absl::InvalidArgumentError(
            absl::StrCat("--state: slot '", kv.first, "' is bound twice"));
      }
    }
    JobRequest::State st;
    st.slot = kv.first;
    st.name =
        absl::StartsWith(kv.second, "@") ? kv.second.substr(1) : kv.second;
    job->states.push_back(std::move(st));
  }
  for (const std::string& text : f.state_specs) {
    if (text.find('=') == std::string::npos) {  // one spec for every state
      SHARD_ASSIGN_OR_RETURN(TreeRule all, ParseTreeRule("*=" + text));
      job->trees.state_rules.push_back(std::move(all));
      continue;
    }
    SHARD_RETURN_IF_ERROR(
        ParseSlotSpec(text, "--state-spec", &JobRequest::State::spec, job));
  }
  for (const std::string& text : f.state_out_specs) {
    SHARD_RETURN_IF_ERROR(ParseSlotSpec(text, "--state-out-spec",
                                        &JobRequest::State::out_spec, job));
  }
  return absl::OkStatus();
}

PartitionSpec StateSpecOf(const JobRequest& job, const JobRequest::State& st) {
  if (st.spec.has_value()) return *st.spec;
  return job.trees.state_rules.empty() ? PartitionSpec()
                                       : job.trees.state_rules.front().spec;
}

}  // namespace shardmap
