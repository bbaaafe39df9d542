// Which devices hold copies of one value, and where copies that should be
// equal are not: a spec that leaves a mesh axis out claims that the
// devices along that axis hold equal copies of each block. The checks
// compare per-device digests (core/digest.h), never the data itself.
//
// Pure functions; thread-safe.
#ifndef SHARDMAP_CORE_REPLICATION_H_
#define SHARDMAP_CORE_REPLICATION_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "core/mesh.h"
#include "core/partition_spec.h"

namespace shardmap {

// The mesh axes of size > 1 that `spec` does not mention, in mesh order:
// along each, every device holds a copy of the same block. Empty when
// every device holds a block of its own. (An unsplit spec mentions none.)
std::vector<std::string> ReplicatedAxes(const Mesh& mesh,
                                        const PartitionSpec& spec);

// Two devices whose copies of one block differ. They differ in their
// coordinate along `axis` only.
struct Divergence {
  int64_t device = 0;
  int64_t other = 0;
  std::string axis;
};

// The first pair of devices (in device order) that should hold equal
// copies under `spec` over `mesh` but report different `digests` (one per
// device of the mesh, by device id). A device is compared with the one at
// coordinate 0 on every axis the spec leaves out; when they differ along
// several axes, the pair returned is one step of the walk between them, so
// it names the single axis along which the copies change. nullopt when
// every block's copies agree (or `digests` does not have one per device).
std::optional<Divergence> FindDivergence(const Mesh& mesh,
                                         const PartitionSpec& spec,
                                         absl::Span<const uint64_t> digests);

}  // namespace shardmap

#endif  // SHARDMAP_CORE_REPLICATION_H_
