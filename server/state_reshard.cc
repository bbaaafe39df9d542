#include "server/state_reshard.h"

#include "absl/strings/str_cat.h"
#include "core/manual_axes.h"
#include "core/status_util.h"
#include "wire/proto_convert.h"

namespace shardmap {

absl::Status PlanStateOutSpecs(const v1::JobSpec& spec, JobPlan* plan) {
  for (const v1::StateBinding& b : spec.states()) {
    if (!b.has_out_spec()) continue;
    StatePlan* st = nullptr;
    for (StatePlan& s : plan->states) {
      if (s.slot == b.slot()) st = &s;
    }
    if (st == nullptr) continue;  // PlanJob refused an unknown slot
    const std::string what =
        absl::StrCat("the out_spec of state '", st->slot, "'");
    if (!st->write) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": ", plan->function.name(), " only reads state '", st->slot,
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
    SHARD_RETURN_IF_ERROR(Annotate(
        CheckSpecsManual("state out", {target}, plan->manual_axes), what));
    SHARD_RETURN_IF_ERROR(
        BlockLayout::Create(
            plan->mesh, target, st->array.meta.shape, what,
            absl::StrCat(
                "resident array '", st->array.name, "' (",
                ShapeString(st->array.meta.dtype, st->array.meta.shape), ")"))
            .status());
    const PartitionSpec read = st->spec.unsplit() ? PartitionSpec() : st->spec;
    if (read.SplitsAlike(target, st->array.meta.shape.size())) continue;
    st->out_spec = target;
  }
  return absl::OkStatus();
}

}  // namespace shardmap
