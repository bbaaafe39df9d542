// brainstate's state_out_specs: a state the function writes is stored back
// in another sharding than the one the job read it in
// (StateBinding.out_spec, shardctl --state-out-spec).
//
// The resharding is part of the job, so it is atomic with the job's other
// writes: each device exposes its new block in the job's sharding to its
// peers, and stages its block of the out sharding, assembled from them
// (ShardJob.state_out_specs, worker/state_out_reshard.h). The job's one
// two-phase commit then publishes the state at its new version in the out
// sharding, or, on any failure (the function, the resharding, a lost
// worker), nothing: the state keeps its previous version and sharding
// (docs/RELIABILITY.md).
//
// Pure logic; thread-compatible.
#ifndef SHARDMAP_SERVER_STATE_RESHARD_H_
#define SHARDMAP_SERVER_STATE_RESHARD_H_

#include "absl/status/status.h"
#include "server/planner.h"
#include "shardmap/v1/coordinator.pb.h"

namespace shardmap {

// Sets StatePlan::out_spec of each written state whose out_spec in `spec`
// splits it otherwise than the job reads it. INVALID_ARGUMENT naming the
// slot for an out_spec on a slot the function only reads (it is never
// stored), a None out_spec, or one that does not fit the array (axes,
// auto axes, rank, divisibility) over the job's mesh.
absl::Status PlanStateOutSpecs(const v1::JobSpec& spec, JobPlan* plan);

}  // namespace shardmap

#endif  // SHARDMAP_SERVER_STATE_RESHARD_H_
