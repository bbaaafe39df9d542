// brainstate's state_out_specs on the worker: a written state stored back
// in another sharding than the job read it in (ShardJob.state_out_specs,
// server/state_reshard.h), resharded inside the job so that the job's one
// two-phase commit stores it, or nothing.
//
// After the function ran, each device exposes its new block of each such
// state (ResidentStore::Expose: readable by the job's peers, never stored
// or reported), waits at `barrier` until every device it reads from has
// done the same, then assembles its block of the out spec from the exposed
// blocks (worker/store/block_fetch.h) and leaves it in the state's slot,
// for StageWrites to stage. The exposed blocks go with the job's staged
// writes (ResidentStore::Commit / Abort).
//
// With auto mesh axes (JAX's axis_names) a device reads only from the
// devices that share its auto coordinates (the blocks are equal along auto
// axes), so `barrier` need only span the manual axes.
//
// Stateless; called from the job's thread.
#ifndef SHARDMAP_WORKER_STATE_OUT_RESHARD_H_
#define SHARDMAP_WORKER_STATE_OUT_RESHARD_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/mesh.h"
#include "core/tensor.h"
#include "shardmap/v1/worker.pb.h"
#include "worker/job_peers.h"
#include "worker/store/resident_store.h"

namespace shardmap {

// Whether the job stores some written state in another spec than it reads
// it in.
bool ReshardsStates(const v1::ShardJob& header);

// What the resharding needs besides the job: the wait for the peers, and
// the reservation of the bytes it assembles (may be null: no budget).
struct StateReshardHooks {
  std::function<absl::Status()> barrier;
  std::function<absl::Status(uint64_t bytes, const std::string& what)> reserve;
};

// Reshards the written states of `states` (this device's blocks, by the
// job's specs) into their out specs. Errors: INVALID_ARGUMENT naming the
// state if the function left a block of another dtype or shape, or an
// out spec that does not fit; the barrier's and the reservation's errors;
// FetchResidentBlock's (a peer that cannot be read), each annotated
// "storing state 'SLOT' (NAME) as SPEC". On error the job must fail: a
// state's block may have moved out of `states`, and blocks may be exposed
// under the job's id (ResidentStore::Abort drops them).
absl::Status ReshardWrittenStates(const v1::ShardJob& header, const Mesh& mesh,
                                  int64_t device, JobPeers& peers,
                                  ResidentStore& store,
                                  const StateReshardHooks& hooks,
                                  absl::Time deadline,
                                  std::map<std::string, Tensor>* states);

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_STATE_OUT_RESHARD_H_
