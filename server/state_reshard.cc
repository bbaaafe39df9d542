#include "server/state_reshard.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status_util.h"
#include "wire/proto_convert.h"

namespace shardmap {

absl::StatusOr<std::vector<StateReshard>> PlanStateReshards(
    const v1::JobSpec& spec, const JobPlan& plan) {
  std::vector<StateReshard> out;
  for (const v1::StateBinding& b : spec.states()) {
    if (!b.has_out_spec()) continue;
    const StatePlan* st = nullptr;
    for (const StatePlan& s : plan.states) {
      if (s.slot == b.slot()) st = &s;
    }
    if (st == nullptr) continue;  // PlanJob refused an unknown slot
    const std::string what =
        absl::StrCat("the out_spec of state '", st->slot, "'");
    if (!st->write) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": ", plan.function.name(), " only reads state '", st->slot,
          "', which is never stored back, so it takes no out spec "
          "(--state-out-spec)"));
    }
    const PartitionSpec target = SpecFromProto(b.out_spec());
    if (target.unsplit()) {
      return absl::InvalidArgumentError(absl::StrCat(
          what,
          " is None, which is only meaningful for inputs; use P() for "
          "a replicated state"));
    }
    const PartitionSpec read = st->spec.unsplit() ? PartitionSpec() : st->spec;
    SHARD_RETURN_IF_ERROR(
        BlockLayout::Create(
            plan.mesh, target, st->array.meta.shape, what,
            absl::StrCat(
                "resident array '", st->array.name, "' (",
                ShapeString(st->array.meta.dtype, st->array.meta.shape), ")"))
            .status());
    if (read.SplitsAlike(target, st->array.meta.shape.size())) continue;
    out.push_back(StateReshard{st->slot, st->array.name, target});
  }
  return out;
}

absl::Status RunStateReshards(const std::string& job_id,
                              const std::vector<StateReshard>& reshards,
                              const JobPlan& plan, const FunctionLookup& lookup,
                              const ResidentIndex* index, JobRunner* runner,
                              const std::vector<WorkerPool::Worker>& workers,
                              absl::Time deadline,
                              const std::function<bool()>& cancelled) {
  for (size_t i = 0; i < reshards.size(); ++i) {
    const StateReshard& r = reshards[i];
    v1::JobSpec spec;
    spec.set_function("identity");
    *spec.mutable_mesh() = MeshToProto(plan.mesh);
    spec.add_args();
    spec.add_resident_args(r.name);
    *spec.add_in_specs() = SpecToProto(r.spec);
    *spec.add_out_specs() = SpecToProto(r.spec);
    spec.add_resident_outputs(r.name);
    spec.set_overwrite(true);
    const std::string where =
        absl::StrCat("state '", r.slot,
                     "' was updated in the job's sharding, but storing "
                     "array '",
                     r.name, "' as ", r.spec.ToString(), " failed");
    auto reshard = PlanJob(spec, lookup, index);
    if (!reshard.ok()) return Annotate(reshard.status(), where);
    std::vector<Tensor> placeholder;  // the workers fetch the argument
    placeholder.emplace_back(DType::kFloat32, Shape{0});
    auto done =
        runner->Run(absl::StrCat(job_id, "-state-", i), *reshard,
                    std::move(placeholder), workers, deadline, cancelled);
    if (!done.ok()) return Annotate(done.status(), where);
  }
  return absl::OkStatus();
}

}  // namespace shardmap
