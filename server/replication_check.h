// Checks that what a job claims is replicated really is, before it commits
// or returns anything: where a spec leaves a mesh axis out, the devices
// along that axis must report one digest for their copies of each block
// (core/replication.h finds where they do not).
//
// Checked in this order; the first failure is returned:
// - with check_rep, the resident arguments and state slots as the devices
//   read them: differing copies there are stored data that is already
//   inconsistent (DATA_LOSS, naming the array, the axis and the devices);
// - always, written states, then the outputs in order: stored ones always
//   (the planner refuses --no-check-rep for those that leave an axis out),
//   returned ones with check_rep, as JAX's check_rep. INVALID_ARGUMENT
//   naming the slot or output, the axis and the devices.
//
// Pure logic; thread-safe.
#ifndef SHARDMAP_SERVER_REPLICATION_CHECK_H_
#define SHARDMAP_SERVER_REPLICATION_CHECK_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/planner.h"
#include "shardmap/v1/worker.pb.h"

namespace shardmap {

// The digests (core/digest.h) one device reported for a job.
struct DeviceDigests {
  std::vector<uint64_t> outputs;         // per output of the function
  std::vector<uint64_t> written_states;  // per plan.states entry written
  std::vector<uint64_t> resident_args;   // per argument (0: sent as chunks)
  std::vector<uint64_t> read_states;     // per plan.states entry, as read
};

// The digests of a device's ShardOutputs. INTERNAL unless it has one per
// output, state slot and argument of `plan`.
absl::StatusOr<DeviceDigests> DigestsFromProto(const JobPlan& plan,
                                               const v1::ShardOutputs& got);

// Whether CheckReplication compares the copies of output `o` (so the
// devices must send its digest): a mesh axis replicates it, and it is
// stored or check_rep is on.
bool ComparesOutput(const JobPlan& plan, size_t o);

// `devices` has one entry per device of plan.mesh, by device id, each with
// the sizes above. `describe_device` names a device in messages (default:
// "device D (mesh coordinates C)").
absl::Status CheckReplication(
    const JobPlan& plan, const std::vector<const DeviceDigests*>& devices,
    const std::function<std::string(int64_t)>& describe_device = nullptr);

}  // namespace shardmap

#endif  // SHARDMAP_SERVER_REPLICATION_CHECK_H_
