// brainstate's state_out_specs: a state the function writes is stored back
// in another sharding than the one the job read it in
// (StateBinding.out_spec). The job commits the new value in the job's
// sharding; then, under the same locks, an identity job over the job's
// mesh reads it and stores it in the out_spec sharding, the workers
// resharding the blocks among themselves.
//
// If that second step fails (a worker lost), the state keeps its new
// value in the job's sharding and the job's error says so.
//
// Thread-compatible; RunStateReshards is called by one job.
#ifndef SHARDMAP_SERVER_STATE_RESHARD_H_
#define SHARDMAP_SERVER_STATE_RESHARD_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/job_runner.h"
#include "server/planner.h"

namespace shardmap {

struct StateReshard {
  std::string slot;
  std::string name;    // the resident array
  PartitionSpec spec;  // the sharding it is stored in
};

// The written states `spec` asks to store in another sharding than the
// job's. INVALID_ARGUMENT naming the slot for an out_spec on a slot the
// function only reads (it is never stored), or an out_spec that does not
// fit the array (axes, rank, divisibility) over the job's mesh.
absl::StatusOr<std::vector<StateReshard>> PlanStateReshards(
    const v1::JobSpec& spec, const JobPlan& plan);

// Stores each state in its new sharding (identity jobs "<job_id>-state-N",
// found through `lookup`). Errors are the identity job's, annotated with
// the slot and array.
absl::Status RunStateReshards(const std::string& job_id,
                              const std::vector<StateReshard>& reshards,
                              const JobPlan& plan, const FunctionLookup& lookup,
                              const ResidentIndex* index, JobRunner* runner,
                              const std::vector<WorkerPool::Worker>& workers,
                              absl::Time deadline,
                              const std::function<bool()>& cancelled);

}  // namespace shardmap

#endif  // SHARDMAP_SERVER_STATE_RESHARD_H_
