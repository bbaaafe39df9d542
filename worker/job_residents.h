// A job's resident arrays on one device: the blocks it reads (resident
// arguments and states, gathered from the workers that hold them) and the
// blocks it writes (stored outputs and written states), staged in the
// ResidentStore until the job commits.
#ifndef SHARDMAP_WORKER_JOB_RESIDENTS_H_
#define SHARDMAP_WORKER_JOB_RESIDENTS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/mesh.h"
#include "core/tensor.h"
#include "shardmap/v1/worker.pb.h"
#include "worker/job_peers.h"
#include "worker/store/resident_store.h"

namespace shardmap {

// Fills the job's resident arguments in `args` (their placeholders) and
// its state slots in `states` with this device's blocks, by the job's
// specs. A donated argument's block (ResidentSource.donate) that this
// worker holds as the job reads it is taken out of `store` and handed over
// without a copy; the versions before each one read are dropped from
// `store` (the coordinator planned against a newer one). Errors:
// INVALID_ARGUMENT (a resident argument past the arguments, a spec that
// does not fit), those of FetchResidentBlock.
absl::Status FetchResidents(const v1::ShardJob& header, const Mesh& mesh,
                            int64_t device, JobPeers& peers,
                            ResidentStore& store, absl::Time deadline,
                            std::vector<Tensor>* args,
                            std::map<std::string, Tensor>* states);

// INVALID_ARGUMENT naming the state unless `value` is, by dtype and
// shape, this device's block of the written state `slot` in the job's
// spec for it (the function must not change a state's block shape).
absl::Status CheckStateBlock(const v1::StateSlot& slot, const Mesh& mesh,
                             const Tensor& value);

// Stages the job's resident writes under its job id; stored outputs and
// states are moved out of `outputs` and `states`, not copied. A state with
// an out spec (ShardJob.state_out_specs) is staged in it: its block in
// `states` must be that spec's (worker/state_out_reshard.h). Errors:
// INVALID_ARGUMENT naming the output or state (past the outputs, a block
// that does not fit its spec, a state whose block changed its shape).
absl::Status StageWrites(const v1::ShardJob& header, const Mesh& mesh,
                         int64_t device, std::vector<Tensor>& outputs,
                         std::map<std::string, Tensor>* states,
                         ResidentStore& store);

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_JOB_RESIDENTS_H_
