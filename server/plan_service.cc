#include "server/plan_service.h"

#include "absl/strings/str_cat.h"
#include "core/status_util.h"
#include "program/dtypes.h"
#include "server/plan_report.h"
#include "server/planner.h"
#include "server/tree_job.h"
#include "wire/shape_program.h"
#include "wire/signature.h"

namespace shardmap {

absl::StatusOr<v1::PlanResponse> PlanService::Plan(
    const v1::JobSpec& spec) const {
  const absl::StatusOr<v1::FunctionSignature> function =
      catalog_->Resolve(spec);
  SHARD_ASSIGN_OR_RETURN(const TreeJob tree, FlattenJobTrees(spec));
  SHARD_ASSIGN_OR_RETURN(
      JobPlan plan,
      PlanTreeJob(
          tree, [&function](const std::string&) { return function; }, index_,
          programs_));
  if (plan.program == nullptr && !plan.function.shape_program().empty()) {
    // A native function with a shape program: its shapes and costs are
    // those of the same computation as a program.
    const std::string& fn = plan.function.name();
    SHARD_ASSIGN_OR_RETURN(nlohmann::json kwargs,
                           ParseKwargs(plan.kwargs_json));
    absl::StatusOr<std::string> source =
        RenderShapeProgram(plan.function.shape_program(), kwargs);
    if (!source.ok()) {
      return absl::InternalError(absl::StrCat(
          fn,
          " declares a shape program that does not fit its keyword "
          "arguments: ",
          source.status().message()));
    }
    std::vector<program::ArgType> args;
    for (const ArgPlan& a : plan.args) {
      args.push_back(
          {program::ElemOf(a.meta.dtype), a.layout.block_shape(), {}});
    }
    program::CheckOptions options;
    options.check_vma = false;  // the function's own check_rep applies
    absl::StatusOr<std::shared_ptr<const program::Program>> shapes =
        program::CheckShared(programs_, *source, plan.mesh, args, options);
    if (!shapes.ok()) {
      // The call's own arguments (an axis out of range, say) are the
      // user's to fix; anything else is the shape program's fault.
      const std::string what =
          absl::StrCat(fn, " (as its shape program ", *source,
                       "): ", shapes.status().message());
      return absl::IsInvalidArgument(shapes.status())
                 ? absl::InvalidArgumentError(what)
                 : absl::InternalError(what);
    }
    if (static_cast<int>((*shapes)->outputs.size()) !=
        plan.function.num_outputs()) {
      return absl::InternalError(absl::StrCat(
          fn, " declares ", plan.function.num_outputs(),
          " outputs but its shape program gives ", (*shapes)->outputs.size()));
    }
    plan.program = *std::move(shapes);
  }
  return ReportPlan(plan, ArgLabels(tree), OutputLabels(tree));
}

}  // namespace shardmap
