#include "server/plan_service.h"

#include "absl/strings/str_cat.h"
#include "core/status_util.h"
#include "program/dtypes.h"
#include "server/plan_report.h"
#include "server/planner.h"
#include "server/shape_program.h"
#include "wire/signature.h"

namespace shardmap {

absl::StatusOr<v1::PlanResponse> PlanService::Plan(
    const v1::JobSpec& spec) const {
  const absl::StatusOr<v1::FunctionSignature> function =
      catalog_->Resolve(spec);
  SHARD_ASSIGN_OR_RETURN(
      JobPlan plan,
      PlanJob(
          spec, [&function](const std::string&) { return function; }, index_,
          programs_));
  if (plan.program == nullptr && !plan.function.shape_program().empty()) {
    // A native function with a shape program: its shapes and costs are
    // those of the same computation as a program.
    SHARD_ASSIGN_OR_RETURN(nlohmann::json kwargs,
                           ParseKwargs(plan.kwargs_json));
    absl::StatusOr<std::string> source =
        RenderShapeProgram(plan.function.shape_program(), kwargs);
    std::vector<program::ArgType> args;
    for (const ArgPlan& a : plan.args) {
      args.push_back(
          {program::ElemOf(a.meta.dtype), a.layout.block_shape(), {}});
    }
    program::CheckOptions options;
    options.check_vma = false;  // the function's own check_rep applies
    absl::StatusOr<std::shared_ptr<const program::Program>> shapes =
        source.status();
    if (source.ok() && programs_ != nullptr) {
      shapes = programs_->Check(*source, plan.mesh, args, options);
    } else if (source.ok()) {
      absl::StatusOr<program::Program> checked =
          program::CheckProgram(*source, plan.mesh, args, options);
      if (checked.ok()) {
        shapes = std::make_shared<const program::Program>(*std::move(checked));
      } else {
        shapes = checked.status();
      }
    }
    if (!shapes.ok()) {
      return absl::InternalError(absl::StrCat(
          plan.function.name(), "'s shape program does not fit this call: ",
          shapes.status().message()));
    }
    plan.program = *std::move(shapes);
  }
  return ReportPlan(plan);
}

}  // namespace shardmap
