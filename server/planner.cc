#include "server/planner.h"

#include "absl/strings/str_cat.h"
#include "core/signature.h"
#include "core/status_util.h"

namespace shardmap {
namespace {

// in_specs / out_specs are a tree prefix of a flat tuple: one spec for all,
// or one per element.
absl::StatusOr<std::vector<PartitionSpec>> BroadcastSpecs(
    const google::protobuf::RepeatedPtrField<v1::PartitionSpec>& specs,
    size_t count, absl::string_view what, absl::string_view elements) {
  std::vector<PartitionSpec> out;
  if (specs.size() == 1) {
    out.assign(count, SpecFromProto(specs[0]));
    return out;
  }
  if (static_cast<size_t>(specs.size()) != count) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " has ", specs.size(), " entries but there ",
        count == 1 ? "is " : "are ", count, " ", elements,
        "; give one spec for all of them or exactly one per ", elements));
  }
  for (const auto& s : specs) out.push_back(SpecFromProto(s));
  return out;
}

}  // namespace

uint64_t JobPlan::input_bytes() const {
  uint64_t total = 0;
  for (const ArgPlan& a : args) total += a.meta.num_bytes();
  return total;
}

bool JobPlan::IsOutputRepresentative(int o, int64_t device) const {
  const std::vector<int64_t> coords = mesh.Coords(device);
  for (int a = 0; a < mesh.num_axes(); ++a) {
    if (!out_specs[o].Mentions(mesh.axes()[a].name) && coords[a] != 0) {
      return false;
    }
  }
  return true;
}

absl::StatusOr<JobPlan> PlanJob(const v1::JobSpec& spec,
                                const FunctionLookup& lookup) {
  auto mesh = MeshFromProto(spec.mesh());
  if (!mesh.ok()) return Annotate(mesh.status(), "mesh");
  JobPlan plan;
  plan.mesh = *std::move(mesh);
  plan.check_rep = !spec.no_check_rep();
  SHARD_ASSIGN_OR_RETURN(plan.function, lookup(spec.function()));
  const std::string& fn = spec.function();

  if (spec.args_size() != plan.function.arity()) {
    return absl::InvalidArgumentError(absl::StrCat(
        SignatureText(plan.function), " takes ", plan.function.arity(),
        " positional argument", plan.function.arity() == 1 ? "" : "s", " but ",
        spec.args_size(), spec.args_size() == 1 ? " was" : " were", " given"));
  }
  if (spec.in_specs_size() == 0 && spec.args_size() > 0) {
    return absl::InvalidArgumentError(
        "in_specs is missing: give one spec for all arguments or one per "
        "argument (--in-spec)");
  }
  SHARD_ASSIGN_OR_RETURN(std::vector<PartitionSpec> in_specs,
                         BroadcastSpecs(spec.in_specs(), spec.args_size(),
                                        "in_specs", "arguments"));
  if (spec.out_specs_size() == 0) {
    return absl::InvalidArgumentError(
        "out_specs is missing: give one spec per output (--out-spec)");
  }
  SHARD_ASSIGN_OR_RETURN(
      plan.out_specs,
      BroadcastSpecs(spec.out_specs(), plan.function.num_outputs(), "out_specs",
                     "outputs"));

  std::vector<DType> dtypes;
  for (int i = 0; i < spec.args_size(); ++i) {
    const std::string value = absl::StrCat("args[", i, "]");
    const std::string what = spec.in_specs_size() == 1
                                 ? "in_specs"
                                 : absl::StrCat("in_specs[", i, "]");
    SHARD_ASSIGN_OR_RETURN(ArrayMeta meta,
                           HeaderFromProto(spec.args(i), value));
    const PartitionSpec& s = in_specs[i];
    const PartitionSpec effective = s.unsplit() ? PartitionSpec() : s;
    SHARD_ASSIGN_OR_RETURN(
        BlockLayout layout,
        BlockLayout::Create(
            plan.mesh, effective, meta.shape, what,
            absl::StrCat(value, " (", ShapeString(meta.dtype, meta.shape),
                         ")")));
    dtypes.push_back(meta.dtype);
    plan.args.push_back(ArgPlan{meta, s, std::move(layout)});
  }

  SHARD_ASSIGN_OR_RETURN(nlohmann::json kwargs,
                         ParseKwargs(spec.kwargs_json()));
  SHARD_ASSIGN_OR_RETURN(nlohmann::json resolved,
                         CheckCall(plan.function, dtypes, kwargs));
  plan.kwargs_json = resolved.dump();

  for (size_t o = 0; o < plan.out_specs.size(); ++o) {
    const PartitionSpec& s = plan.out_specs[o];
    const std::string what = spec.out_specs_size() == 1
                                 ? "out_specs"
                                 : absl::StrCat("out_specs[", o, "]");
    if (s.unsplit()) {
      return absl::InvalidArgumentError(absl::StrCat(
          what,
          " is None, which is only meaningful for inputs; use P() for "
          "an output replicated over every mesh axis"));
    }
    // The rank is known only after the function runs; check the names now.
    SHARD_RETURN_IF_ERROR(
        s.Validate(plan.mesh, 1 << 20, what, absl::StrCat(fn, " output ", o)));
  }
  return plan;
}

}  // namespace shardmap
