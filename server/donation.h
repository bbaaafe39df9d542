// Donated arguments (JobSpec.donate_args, JAX's donate_argnums): a job
// that stores a resident array back under its own name, in the sharding
// it has, may consume the array instead of reading a copy of it. The
// workers then hand the stored blocks to the function, so an update in
// place holds one copy of the array instead of three.
//
// The price is the restart guarantee: a job that fails after it reached
// the workers may have consumed some blocks, so the array is marked lost
// (ResidentIndex::MarkLost) and its version dropped on the job's workers;
// using it is FAILED_PRECONDITION until it is put or restored again. It is
// never served from some blocks of the old version and some of a partial
// new one (docs/RELIABILITY.md).
//
// Stateless functions; thread-safe.
#ifndef SHARDMAP_SERVER_DONATION_H_
#define SHARDMAP_SERVER_DONATION_H_

#include <vector>

#include "absl/status/status.h"
#include "server/planner.h"
#include "server/resident_index.h"
#include "server/worker_pool.h"
#include "shardmap/v1/coordinator.pb.h"

namespace shardmap {

// Marks the plan's donated arguments (ArgPlan::donated). INVALID_ARGUMENT
// naming the argument for an index past the arguments, an argument that
// is not resident, one whose array the job also reads elsewhere (another
// argument or a state), or one that no output stores back under its name
// with the array's own mesh and spec (read in that spec).
absl::Status PlanDonations(const v1::JobSpec& spec, JobPlan* plan);

// Whether the workers consume `a`'s blocks themselves: each device of the
// job runs on the worker that holds its block, and no two devices share a
// worker. Otherwise the job reads the array as any other (a copy each) and
// a failure leaves it as it was.
bool DonationApplies(const ResidentArray& a,
                     const std::vector<WorkerPool::Worker>& workers);

}  // namespace shardmap

#endif  // SHARDMAP_SERVER_DONATION_H_
