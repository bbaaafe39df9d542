// shardctl run's state flags: --state SLOT=NAME, --state-spec SLOT=SPEC or
// SPEC (one for every state), --state-out-spec SLOT=SPEC.
#ifndef SHARDMAP_CLIENT_STATE_FLAGS_H_
#define SHARDMAP_CLIENT_STATE_FLAGS_H_

#include "absl/status/status.h"
#include "client/commands.h"
#include "client/shard_client.h"
#include "core/partition_spec.h"

namespace shardmap {

// Binds job->states from the flags. INVALID_ARGUMENT naming the flag and
// the slot: a malformed binding, a slot bound twice, a spec for an unbound
// slot, two specs for one slot, a malformed spec.
absl::Status ParseStates(const RunFlags& f, JobRequest* job);

// The spec a bound state is read in: its own, the --state-spec for all,
// or P().
PartitionSpec StateSpecOf(const JobRequest& job, const JobRequest::State& st);

}  // namespace shardmap

#endif  // SHARDMAP_CLIENT_STATE_FLAGS_H_
