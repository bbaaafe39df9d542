#include "server/planner.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/collective_rules.h"
#include "core/manual_axes.h"
#include "core/replication.h"
#include "core/status_util.h"
#include "program/checker.h"
#include "program/dtypes.h"
#include "server/donation.h"
#include "server/job_axes.h"
#include "server/state_reshard.h"
#include "wire/signature.h"

namespace shardmap {
namespace {

// in_specs / out_specs are a tree prefix of a flat tuple: one spec for all,
// or one per element.
template <typename Specs>
absl::StatusOr<std::vector<PartitionSpec>> BroadcastSpecs(
    const Specs& specs, size_t count, absl::string_view what,
    absl::string_view element) {
  std::vector<PartitionSpec> out;
  if (specs.size() == 1) {
    out.assign(count, SpecFromProto(*specs.begin()));
    return out;
  }
  if (static_cast<size_t>(specs.size()) != count) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " has ", specs.size(), " entries but there ",
        count == 1 ? "is " : "are ", count, " ", element, count == 1 ? "" : "s",
        "; give one spec for all of them or exactly one per ", element));
  }
  for (const auto& s : specs) out.push_back(SpecFromProto(s));
  return out;
}

// "in_specs" when one spec serves all, else "in_specs[i]".
std::string SpecName(absl::string_view field, int i, int count) {
  return count == 1 ? std::string(field) : absl::StrCat(field, "[", i, "]");
}

// Refuses --no-check-rep for a job that stores copies: a stored output or
// written state whose spec leaves a mesh axis out is stored once per
// device along it, and only copies checked to be equal are stored.
absl::Status RefuseUncheckedCopies(const JobPlan& plan) {
  auto refuse = [&](const std::string& what, const PartitionSpec& spec,
                    const std::string& fix) -> absl::Status {
    std::vector<std::string> axes = ReplicatedAxes(plan.mesh, spec);
    if (axes.empty()) return absl::OkStatus();
    for (std::string& a : axes) a = absl::StrCat("'", a, "'");
    return absl::InvalidArgumentError(absl::StrCat(
        "--no-check-rep cannot be used with ", what, ": its spec ",
        spec.ToString(), " leaves mesh ", axes.size() == 1 ? "axis " : "axes ",
        absl::StrJoin(axes, ", "), " out, so every device along ",
        axes.size() == 1 ? "it" : "them",
        " stores a copy, and only copies "
        "checked to be equal are stored. Drop --no-check-rep (the copies are "
        "then compared before anything is stored), or ",
        fix));
  };
  const std::string fn = plan.function.name();
  for (size_t o = 0; o < plan.out_specs.size(); ++o) {
    if (plan.StoredAs(o).empty()) continue;
    SHARD_RETURN_IF_ERROR(refuse(
        absl::StrCat(fn, " output ", o, " stored as '", plan.StoredAs(o), "'"),
        plan.out_specs[o], "name the axis in the out_spec"));
  }
  for (const StatePlan& st : plan.states) {
    if (!st.write) continue;
    SHARD_RETURN_IF_ERROR(refuse(
        absl::StrCat("state slot '", st.slot, "' (array '", st.array.name,
                     "'), which ", fn, " writes"),
        st.spec.unsplit() ? PartitionSpec() : st.spec,
        absl::StrCat("give the slot a spec that names the axis (--state-spec ",
                     st.slot, "=...)")));
  }
  return absl::OkStatus();
}

// Checks an expression program for the job's arguments (planned into
// `plan->args`), fixes its number of outputs, and applies out_specs to
// them, with JAX's replication rule unless check_rep is off.
absl::Status PlanProgram(const v1::JobSpec& spec,
                         program::ProgramCache* programs, JobPlan* plan) {
  const std::string& fn = plan->function.name();
  if (!spec.kwargs_json().empty() && spec.kwargs_json() != "{}") {
    return absl::InvalidArgumentError(absl::StrCat(
        "the program ", fn,
        " takes no keyword arguments (--kwargs): write constants into the "
        "program's source"));
  }
  if (spec.states_size() > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("the program ", fn,
                     " takes no state slots (--state): pass the array as an "
                     "argument and store the result (--out @NAME)"));
  }
  std::vector<program::ArgType> args;
  for (const ArgPlan& a : plan->args) {
    program::ArgType t{
        program::ElemOf(a.meta.dtype), a.layout.block_shape(), {}};
    if (plan->check_rep && !a.spec.unsplit()) {
      for (const std::string& axis : a.spec.MentionedAxes()) {
        t.vma.insert(axis);
      }
    }
    args.push_back(std::move(t));
  }
  program::CheckOptions options;
  options.check_vma = plan->check_rep;
  options.manual_axes = plan->manual_axes;
  const std::string& source = plan->function.program();
  SHARD_ASSIGN_OR_RETURN(
      plan->program,
      program::CheckShared(programs, source, plan->mesh, args, options));
  const int outputs = static_cast<int>(plan->program->outputs.size());
  plan->function.set_num_outputs(outputs);
  SHARD_ASSIGN_OR_RETURN(
      plan->out_specs,
      BroadcastSpecs(spec.out_specs(), outputs, "out_specs", "output"));
  for (int o = 0; o < outputs; ++o) {
    const program::ValueType& t =
        plan->program->instrs[plan->program->outputs[o]].type;
    SHARD_RETURN_IF_ERROR(plan->out_specs[o].Validate(
        plan->mesh, static_cast<int>(t.shape.size()),
        SpecName("out_specs", o, spec.out_specs_size()),
        absl::StrCat(fn, " output ", o, " (", program::ElemTypeName(t.elem),
                     "[", absl::StrJoin(t.shape, ","), "] per device)")));
  }
  if (plan->check_rep) {
    SHARD_RETURN_IF_ERROR(program::CheckOutputReplication(
        *plan->program, plan->mesh, plan->out_specs, fn, source));
  }
  plan->kwargs_json = "{}";
  return absl::OkStatus();
}

// JAX's rule that specs name only manual axes, for the in_specs and
// out_specs as given (Infer entries are checked once resolved).
absl::Status CheckGivenSpecsManual(
    const std::vector<v1::PartitionSpec>& in_specs, const v1::JobSpec& spec,
    const JobPlan& plan) {
  if (plan.manual_axes.empty()) return absl::OkStatus();
  std::vector<PartitionSpec> in, out;
  for (const auto& s : in_specs) in.push_back(SpecFromProto(s));
  for (const auto& s : spec.out_specs()) out.push_back(SpecFromProto(s));
  SHARD_RETURN_IF_ERROR(CheckSpecsManual("in", in, plan.manual_axes));
  return CheckSpecsManual("out", out, plan.manual_axes);
}

// The same rule for argument `i`'s inferred spec (its resident array's).
absl::Status CheckInferredSpecManual(int i,
                                     const std::vector<PartitionSpec>& in_specs,
                                     const JobPlan& plan) {
  if (plan.manual_axes.empty()) return absl::OkStatus();
  std::vector<PartitionSpec> only(in_specs.size());
  only[i] = in_specs[i];
  return CheckSpecsManual("in", only, plan.manual_axes);
}

}  // namespace

uint64_t JobPlan::input_bytes() const {
  uint64_t total = 0;
  for (const ArgPlan& a : args) {
    if (!a.resident.has_value()) total += a.meta.num_bytes();
  }
  return total;
}

const std::string& JobPlan::StoredAs(size_t o) const {
  static const std::string* const kReturned = new std::string();
  return o < resident_outputs.size() ? resident_outputs[o] : *kReturned;
}

bool JobPlan::writes_residents() const {
  for (const auto& n : resident_outputs) {
    if (!n.empty()) return true;
  }
  for (const auto& st : states) {
    if (st.write) return true;
  }
  return false;
}

bool JobPlan::donates() const {
  for (const ArgPlan& a : args) {
    if (a.donated) return true;
  }
  return false;
}

ResidentAccess AccessOf(const v1::JobSpec& spec,
                        const v1::FunctionSignature& function) {
  ResidentAccess access;
  for (const std::string& name : spec.resident_outputs()) {
    if (!name.empty()) access.writes.insert(name);
  }
  for (const v1::StateSlotSpec& slot : function.states()) {
    const v1::StateBinding* binding = nullptr;  // the last one, as PlanJob
    for (const v1::StateBinding& b : spec.states()) {
      if (b.slot() == slot.name()) binding = &b;
    }
    if (binding == nullptr) continue;
    (slot.write() ? access.writes : access.reads).insert(binding->name());
  }
  const int args = std::min(spec.args_size(), spec.resident_args_size());
  for (int i = 0; i < args; ++i) {
    const std::string& name = spec.resident_args(i);
    if (!name.empty()) access.reads.insert(name);
  }
  for (const std::string& name : access.writes) access.reads.erase(name);
  return access;
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
                                const FunctionLookup& lookup,
                                const ResidentIndex* index,
                                program::ProgramCache* programs) {
  SHARD_ASSIGN_OR_RETURN(Mesh mesh, JobMesh(spec, index));
  JobPlan plan;
  plan.mesh = std::move(mesh);
  SHARD_ASSIGN_OR_RETURN(plan.manual_axes, JobManualAxes(spec, plan.mesh));
  plan.check_rep = !spec.no_check_rep();
  SHARD_ASSIGN_OR_RETURN(plan.function, lookup(spec.function()));
  const std::string fn = plan.function.name();
  const bool is_program = !plan.function.program().empty();

  if (spec.args_size() != plan.function.arity()) {
    return absl::InvalidArgumentError(absl::StrCat(
        SignatureText(plan.function), " takes ", plan.function.arity(),
        " positional argument", plan.function.arity() == 1 ? "" : "s", " but ",
        spec.args_size(), spec.args_size() == 1 ? " was" : " were", " given"));
  }
  SHARD_ASSIGN_OR_RETURN(const std::vector<v1::PartitionSpec> given_in_specs,
                         InSpecsOrInfer(spec));
  const int num_in_specs = static_cast<int>(given_in_specs.size());
  if (spec.out_specs_size() == 0) {
    return absl::InvalidArgumentError(
        "out_specs is missing: give one spec per output (--out-spec)");
  }
  // As JAX: every spec's axis names (inputs and outputs) first, then the
  // prefix structure, then ranks and divisibility. Ranks are checked later,
  // so the rank given here is one no spec can exceed.
  constexpr int kAnyRank = 1 << 20;
  for (int i = 0; i < num_in_specs; ++i) {
    SHARD_RETURN_IF_ERROR(SpecFromProto(given_in_specs[i])
                              .Validate(plan.mesh, kAnyRank,
                                        SpecName("in_specs", i, num_in_specs),
                                        "its argument"));
  }
  for (int o = 0; o < spec.out_specs_size(); ++o) {
    const std::string what = SpecName("out_specs", o, spec.out_specs_size());
    const PartitionSpec s = SpecFromProto(spec.out_specs(o));
    if (s.infer()) {
      return absl::InvalidArgumentError(absl::StrCat(
          what,
          " is Infer, which only in_specs of resident arguments may "
          "be; give the output's spec"));
    }
    if (s.unsplit()) {
      return absl::InvalidArgumentError(absl::StrCat(
          what,
          " is None, which is only meaningful for inputs; use P() for "
          "an output replicated over every mesh axis"));
    }
    SHARD_RETURN_IF_ERROR(
        s.Validate(plan.mesh, kAnyRank, what, absl::StrCat(fn, " output ", o)));
  }
  SHARD_RETURN_IF_ERROR(CheckGivenSpecsManual(given_in_specs, spec, plan));
  SHARD_ASSIGN_OR_RETURN(
      std::vector<PartitionSpec> in_specs,
      BroadcastSpecs(given_in_specs, spec.args_size(), "in_specs", "argument"));
  if (!is_program) {  // a program's outputs are known once it is checked
    SHARD_ASSIGN_OR_RETURN(
        plan.out_specs,
        BroadcastSpecs(spec.out_specs(), plan.function.num_outputs(),
                       "out_specs", "output"));
  }

  std::vector<DType> dtypes;
  for (int i = 0; i < spec.args_size(); ++i) {
    const std::string value = absl::StrCat("args[", i, "]");
    const std::string what = SpecName("in_specs", i, num_in_specs);
    std::optional<ResidentArray> resident;
    if (i < spec.resident_args_size() && !spec.resident_args(i).empty()) {
      if (index == nullptr) {
        return absl::InvalidArgumentError(
            "this server keeps no resident arrays");
      }
      SHARD_ASSIGN_OR_RETURN(resident, index->Find(spec.resident_args(i)));
    }
    ArrayMeta meta;
    if (resident.has_value()) {
      meta = resident->meta;
    } else {
      SHARD_ASSIGN_OR_RETURN(meta, HeaderFromProto(spec.args(i), value));
    }
    if (in_specs[i].infer()) {
      SHARD_ASSIGN_OR_RETURN(in_specs[i], InferredSpec(i, resident, plan.mesh));
      SHARD_RETURN_IF_ERROR(CheckInferredSpecManual(i, in_specs, plan));
    }
    const PartitionSpec& s = in_specs[i];
    const PartitionSpec effective = s.unsplit() ? PartitionSpec() : s;
    SHARD_ASSIGN_OR_RETURN(
        BlockLayout layout,
        BlockLayout::Create(
            plan.mesh, effective, meta.shape, what,
            absl::StrCat(value, " (", ShapeString(meta.dtype, meta.shape),
                         ")")));
    dtypes.push_back(meta.dtype);
    plan.args.push_back(
        ArgPlan{meta, s, std::move(layout), std::move(resident)});
  }

  if (is_program) {
    SHARD_RETURN_IF_ERROR(PlanProgram(spec, programs, &plan));
  } else {
    SHARD_ASSIGN_OR_RETURN(nlohmann::json kwargs,
                           ParseKwargs(spec.kwargs_json()));
    SHARD_ASSIGN_OR_RETURN(nlohmann::json resolved,
                           CheckCall(plan.function, dtypes, kwargs));
    plan.kwargs_json = resolved.dump();
    std::vector<Shape> blocks;
    for (const ArgPlan& a : plan.args) {
      blocks.push_back(a.layout.block_shape());
    }
    SHARD_RETURN_IF_ERROR(CheckCollectiveCall(fn, plan.function.collective(),
                                              plan.mesh, blocks, resolved,
                                              plan.manual_axes));
  }

  // Stored outputs and states.
  if (spec.resident_outputs_size() > 0 &&
      spec.resident_outputs_size() != plan.function.num_outputs()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "resident_outputs has ", spec.resident_outputs_size(), " entries but ",
        fn, " has ", plan.function.num_outputs(), " outputs"));
  }
  for (const std::string& name : spec.resident_outputs()) {
    if (!name.empty()) SHARD_RETURN_IF_ERROR(ResidentIndex::ValidateName(name));
    plan.resident_outputs.push_back(name);
  }
  plan.overwrite = spec.overwrite();
  for (const v1::StateBinding& b : spec.states()) {
    const v1::StateSlotSpec* slot = nullptr;
    for (const auto& s : plan.function.states()) {
      if (s.name() == b.slot()) slot = &s;
    }
    if (slot == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          fn, " has no state slot '", b.slot(), "'",
          plan.function.states_size() == 0 ? "; it takes no states" : ""));
    }
  }
  for (const auto& slot : plan.function.states()) {
    const v1::StateBinding* binding = nullptr;
    for (const auto& b : spec.states()) {
      if (b.slot() == slot.name()) binding = &b;
    }
    if (binding == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          fn, " needs its state '", slot.name(),
          "' bound to a resident array: --state ", slot.name(), "=NAME"));
    }
    if (index == nullptr) {
      return absl::InvalidArgumentError("this server keeps no resident arrays");
    }
    StatePlan st;
    st.slot = slot.name();
    st.write = slot.write();
    SHARD_ASSIGN_OR_RETURN(st.array, index->Find(binding->name()));
    st.spec =
        binding->has_spec() ? SpecFromProto(binding->spec()) : PartitionSpec();
    if (st.spec.infer()) st.spec = st.array.spec;  // the array's own
    SHARD_RETURN_IF_ERROR(
        CheckSpecsManual("state", {st.spec}, plan.manual_axes));
    SHARD_RETURN_IF_ERROR(
        BlockLayout::Create(
            plan.mesh, st.spec.unsplit() ? PartitionSpec() : st.spec,
            st.array.meta.shape,
            absl::StrCat("the spec of state '", st.slot, "'"),
            absl::StrCat("resident array '", st.array.name, "' (",
                         ShapeString(st.array.meta.dtype, st.array.meta.shape),
                         ")"))
            .status());
    plan.states.push_back(std::move(st));
  }
  if (!plan.check_rep) SHARD_RETURN_IF_ERROR(RefuseUncheckedCopies(plan));
  SHARD_RETURN_IF_ERROR(PlanStateOutSpecs(spec, &plan));
  SHARD_RETURN_IF_ERROR(PlanDonations(spec, &plan));
  plan.access = AccessOf(spec, plan.function);
  return plan;
}

}  // namespace shardmap
