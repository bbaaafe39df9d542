#include "core/replication.h"

namespace shardmap {

std::vector<std::string> ReplicatedAxes(const Mesh& mesh,
                                        const PartitionSpec& spec) {
  std::vector<std::string> axes;
  for (const MeshAxis& a : mesh.axes()) {
    if (a.size > 1 && !spec.Mentions(a.name)) axes.push_back(a.name);
  }
  return axes;
}

std::optional<Divergence> FindDivergence(const Mesh& mesh,
                                         const PartitionSpec& spec,
                                         absl::Span<const uint64_t> digests) {
  const int64_t n = mesh.num_devices();
  if (static_cast<int64_t>(digests.size()) != n) return std::nullopt;
  std::vector<bool> replicated(mesh.num_axes(), false);
  for (int a = 0; a < mesh.num_axes(); ++a) {
    replicated[a] = !spec.Mentions(mesh.axes()[a].name);
  }
  for (int64_t d = 0; d < n; ++d) {
    const std::vector<int64_t> target = mesh.Coords(d);
    std::vector<int64_t> at = target;
    for (int a = 0; a < mesh.num_axes(); ++a) {
      if (replicated[a]) at[a] = 0;
    }
    int64_t prev = mesh.DeviceId(at);
    if (digests[prev] == digests[d]) continue;
    // Walk from the block's first copy to `d` one axis at a time; the
    // digest changes at some step, and that step names one axis.
    for (int a = 0; a < mesh.num_axes(); ++a) {
      if (at[a] == target[a]) continue;
      at[a] = target[a];
      const int64_t next = mesh.DeviceId(at);
      if (digests[next] != digests[prev]) {
        return Divergence{prev, next, mesh.axes()[a].name};
      }
      prev = next;
    }
  }
  return std::nullopt;
}

}  // namespace shardmap
