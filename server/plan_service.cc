#include "server/plan_service.h"

#include "core/status_util.h"
#include "server/plan_report.h"
#include "server/planner.h"

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
  return ReportPlan(plan);
}

}  // namespace shardmap
