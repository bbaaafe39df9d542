// What `shardctl plan` shows of a planned job (the Plan RPC's answer):
// the global and per-device shapes of every input and output, the costs
// per device (arithmetic, collective bytes, the coordinator's scatter and
// gather, peak memory) and a picture of each array's blocks.
//
// Pure function of the plan; thread-safe.
#ifndef SHARDMAP_SERVER_PLAN_REPORT_H_
#define SHARDMAP_SERVER_PLAN_REPORT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/planner.h"
#include "shardmap/v1/coordinator.pb.h"

namespace shardmap {

// Output shapes and costs come from plan.program: the expression program,
// or a native function's shape program; without one they are reported as
// unknown (-1) and the text says so.
// `arg_labels`: what to call each argument (server/tree_job.h ArgLabels);
// "args[i]" for those it does not name. `out_labels`: what to call each
// output (OutputLabels, tree paths); "output o" for those it does not
// name.
absl::StatusOr<v1::PlanResponse> ReportPlan(
    const JobPlan& plan, const std::vector<std::string>& arg_labels = {},
    const std::vector<std::string>& out_labels = {});

}  // namespace shardmap

#endif  // SHARDMAP_SERVER_PLAN_REPORT_H_
