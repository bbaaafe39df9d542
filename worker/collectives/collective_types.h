// Terms shared by the collective algorithms: the group a device belongs to
// for one collective, the reduction, and the tag that keeps one
// collective's messages apart from every other's.
#ifndef SHARDMAP_WORKER_COLLECTIVES_COLLECTIVE_TYPES_H_
#define SHARDMAP_WORKER_COLLECTIVES_COLLECTIVE_TYPES_H_

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/dtype.h"
#include "worker/transport/peer_transport.h"

namespace shardmap {

// The devices that take part in one collective with this device, in group
// rank order (row-major over the collective's axes in the order the call
// names them), and this device's rank among them.
struct GroupView {
  std::vector<int64_t> devices;  // device id of each rank
  int rank = 0;                  // this device's rank
  int size() const { return static_cast<int>(devices.size()); }
};

enum class ReduceOp { kSum, kMax, kMin };

// Must be unique among the collectives running at once in one job: the
// communicator numbers a job's collectives 0, 1, 2, ... on every device.
struct CollectiveTag {
  uint64_t seq = 0;
  Fingerprint fingerprint;
};

// Which algorithm a collective uses. kAuto picks by message size.
enum class Algorithm { kAuto, kRing, kRecursiveDoubling, kDirect };

// The checks every collective makes of its group before sending anything:
// at least one rank, `rank` in range, every device inside the transport's
// mesh and listed once, and this rank's device being the transport's.
// INVALID_ARGUMENT naming the field, prefixed with `options_name`
// ("AllReduceOptions.group.rank is 4, outside [0, 4)").
inline absl::Status ValidateGroup(const GroupView& group,
                                  const PeerTransport& transport,
                                  absl::string_view options_name) {
  const int n = group.size();
  if (n == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(options_name, ".group.devices is empty"));
  }
  if (group.rank < 0 || group.rank >= n) {
    return absl::InvalidArgumentError(
        absl::StrCat(options_name, ".group.rank is ", group.rank,
                     ", outside [0, ", n, ") for a group of ", n));
  }
  std::vector<std::pair<int64_t, int>> device_ranks;
  for (int r = 0; r < n; ++r) {
    const int64_t device = group.devices[r];
    if (device < 0 || device >= transport.num_devices()) {
      return absl::InvalidArgumentError(absl::StrCat(
          options_name, ".group.devices[", r, "] is device ", device,
          ", outside the mesh's devices [0, ", transport.num_devices(), ")"));
    }
    device_ranks.emplace_back(device, r);
  }
  std::sort(device_ranks.begin(), device_ranks.end());
  for (size_t i = 1; i < device_ranks.size(); ++i) {
    if (device_ranks[i].first == device_ranks[i - 1].first) {
      return absl::InvalidArgumentError(absl::StrCat(
          options_name, ".group.devices lists device ", device_ranks[i].first,
          " twice (ranks ", device_ranks[i - 1].second, " and ",
          device_ranks[i].second, ")"));
    }
  }
  if (group.devices[group.rank] != transport.device()) {
    return absl::InvalidArgumentError(absl::StrCat(
        options_name, ".group.devices[", group.rank, "] (this rank) is device ",
        group.devices[group.rank], ", but the transport speaks for device ",
        transport.device()));
  }
  return absl::OkStatus();
}

// Runs `run`, which lends buffers through `transport` (Lend or
// LendUntilTaken), then settles them: if `run` failed, abandons them and
// returns its error; else waits for them (Settle's errors).
template <typename Run>
absl::Status RunAndSettle(PeerTransport& transport, Run run) {
  absl::Status s = run();
  if (!s.ok()) {
    transport.Settle(/*abandon=*/true).IgnoreError();
    return s;
  }
  return transport.Settle(/*abandon=*/false);
}

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_COLLECTIVES_COLLECTIVE_TYPES_H_
