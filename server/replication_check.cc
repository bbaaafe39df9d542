#include "server/replication_check.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "core/replication.h"

namespace shardmap {
namespace {

// The spec whose replicated axes hold copies of a value (an unsplit
// value is one copy per device).
PartitionSpec CopiesSpec(const PartitionSpec& spec) {
  return spec.unsplit() ? PartitionSpec() : spec;
}

// The first divergence of the digests `pick` selects, under `spec`.
std::optional<Divergence> Diverges(
    const JobPlan& plan, const PartitionSpec& spec,
    const std::vector<const DeviceDigests*>& devices,
    const std::function<uint64_t(const DeviceDigests&)>& pick) {
  const PartitionSpec s = CopiesSpec(spec);
  if (ReplicatedAxes(plan.mesh, s).empty()) return std::nullopt;
  std::vector<uint64_t> digests;
  digests.reserve(devices.size());
  for (const DeviceDigests* d : devices) digests.push_back(pick(*d));
  return FindDivergence(plan.mesh, s, digests);
}

// Values read from a resident array whose copies already disagree.
absl::Status DivergentRead(const ResidentArray& a, const std::string& pair,
                           const std::string& axis) {
  return absl::DataLossError(absl::StrCat(
      "resident array '", a.name, "' (spec ", a.spec.ToString(), " over mesh ",
      a.mesh.ToString(), ") holds copies that differ: ", pair,
      " read different values for the same block along mesh axis '", axis,
      "'. Its copies should be equal: it was stored before copies were "
      "checked, or its stored blocks have changed. Write it again (put "
      "--overwrite) or delete it (rm)"));
}

// A stored value whose copies differ; `what` says what is stored, and
// `fix` how to store a value that varies along the axis.
absl::Status DivergentWrite(const std::string& what, const PartitionSpec& spec,
                            const std::string& pair, const std::string& axis,
                            const std::string& fix) {
  return absl::InvalidArgumentError(absl::StrCat(
      what, " with spec ", spec.ToString(),
      ", but its copies differ along mesh axis '", axis, "': ", pair,
      " disagree. Nothing was stored. If it varies along '", axis, "', ", fix,
      "; if not, check the function"));
}

}  // namespace

bool ComparesOutput(const JobPlan& plan, size_t o) {
  if (plan.StoredAs(o).empty() && !plan.check_rep) return false;
  return !ReplicatedAxes(plan.mesh, CopiesSpec(plan.out_specs[o])).empty();
}

absl::Status CheckReplication(
    const JobPlan& plan, const std::vector<const DeviceDigests*>& devices,
    const std::function<std::string(int64_t)>& describe_device) {
  auto name = [&](int64_t d) {
    return describe_device ? describe_device(d)
                           : absl::StrCat("device ", d, " (mesh coordinates ",
                                          ShapeTuple(plan.mesh.Coords(d)), ")");
  };
  auto pair = [&](const Divergence& v) {
    return absl::StrCat(name(v.device), " and ", name(v.other));
  };
  const std::string fn = plan.function.name();

  // What the devices read: stored data that is already inconsistent.
  for (size_t i = 0; plan.check_rep && i < plan.args.size(); ++i) {
    const ArgPlan& a = plan.args[i];
    if (!a.resident.has_value()) continue;
    if (auto v = Diverges(plan, a.spec, devices, [i](const DeviceDigests& d) {
          return d.resident_args[i];
        })) {
      return DivergentRead(*a.resident, pair(*v), v->axis);
    }
  }
  for (size_t i = 0; plan.check_rep && i < plan.states.size(); ++i) {
    const StatePlan& st = plan.states[i];
    if (auto v = Diverges(plan, st.spec, devices, [i](const DeviceDigests& d) {
          return d.read_states[i];
        })) {
      return DivergentRead(st.array, pair(*v), v->axis);
    }
  }

  // What the job stores: checked whatever check_rep says.
  for (size_t i = 0; i < plan.states.size(); ++i) {
    const StatePlan& st = plan.states[i];
    if (!st.write) continue;
    if (auto v = Diverges(plan, st.spec, devices, [i](const DeviceDigests& d) {
          return d.written_states[i];
        })) {
      return DivergentWrite(
          absl::StrCat("state slot '", st.slot, "' (array '", st.array.name,
                       "') is written"),
          st.spec.unsplit() ? PartitionSpec() : st.spec, pair(*v), v->axis,
          absl::StrCat("give the slot a spec that names the axis "
                       "(--state-spec ",
                       st.slot, "=...)"));
    }
  }
  for (size_t o = 0; o < plan.out_specs.size(); ++o) {
    if (!ComparesOutput(plan, o)) continue;
    const std::string& stored = plan.StoredAs(o);
    auto v = Diverges(plan, plan.out_specs[o], devices,
                      [o](const DeviceDigests& d) { return d.outputs[o]; });
    if (!v.has_value()) continue;
    if (!stored.empty()) {
      return DivergentWrite(
          absl::StrCat(fn, " output ", o, " is stored as '", stored, "'"),
          plan.out_specs[o], pair(*v), v->axis,
          "name the axis in its out_spec");
    }
    const std::string what = plan.out_specs.size() == 1
                                 ? "out_specs"
                                 : absl::StrCat("out_specs[", o, "]");
    return absl::InvalidArgumentError(absl::StrCat(
        what, " is ", plan.out_specs[o].ToString(), " which implies that ", fn,
        " output ", o, " is replicated across mesh axis '", v->axis, "', but ",
        pair(*v),
        " returned different values. If the output varies over that axis, "
        "mention it in the out_spec; if not, check the function, or pass "
        "--no-check-rep to skip this check"));
  }
  return absl::OkStatus();
}

absl::StatusOr<DeviceDigests> DigestsFromProto(const JobPlan& plan,
                                               const v1::ShardOutputs& got) {
  const size_t outputs = plan.out_specs.size(), states = plan.states.size();
  const size_t args = plan.args.size();
  if (static_cast<size_t>(got.outputs_size()) != outputs ||
      static_cast<size_t>(got.digests_size()) != outputs ||
      static_cast<size_t>(got.state_digests_size()) != states ||
      static_cast<size_t>(got.read_state_digests_size()) != states ||
      static_cast<size_t>(got.resident_arg_digests_size()) != args) {
    return absl::InternalError(absl::StrCat(
        "worker answered ", plan.function.name(), " with ", got.outputs_size(),
        " outputs, ", got.digests_size(), " output digests, ",
        got.state_digests_size(), " + ", got.read_state_digests_size(),
        " state digests and ", got.resident_arg_digests_size(),
        " argument digests where ", outputs, ", ", outputs, ", ", states, " + ",
        states, " and ", args,
        " were expected (is the worker an older shardmap?)"));
  }
  for (const StatePlan& st : plan.states) {
    if (st.out_spec.has_value() && !got.state_out_specs_applied()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "state '", st.slot, "' (", st.array.name, ") is to be stored as ",
          st.out_spec->ToString(),
          " (--state-out-spec), but the worker did not store it so: it is an "
          "older shardmap that ignores ShardJob.state_out_specs; upgrade the "
          "workers with or before the coordinator. No state was changed."));
    }
  }
  DeviceDigests d;
  d.outputs.assign(got.digests().begin(), got.digests().end());
  d.written_states.assign(got.state_digests().begin(),
                          got.state_digests().end());
  d.read_states.assign(got.read_state_digests().begin(),
                       got.read_state_digests().end());
  d.resident_args.assign(got.resident_arg_digests().begin(),
                         got.resident_arg_digests().end());
  return d;
}

}  // namespace shardmap
