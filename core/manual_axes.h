// JAX's partial-manual shard_map (axis_names=, the legacy auto=): the
// manual mesh axes a job's specs and collectives may name; the others are
// auto, and the function's work is repeated along them.
//
// Pure functions; thread-safe.
#ifndef SHARDMAP_CORE_MANUAL_AXES_H_
#define SHARDMAP_CORE_MANUAL_AXES_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/mesh.h"
#include "core/partition_spec.h"

namespace shardmap {

// The manual axes, in mesh order, from axis_names (the manual ones) and
// auto_axes (their complement); both empty: every axis. INVALID_ARGUMENT
// in JAX's words for a name that is not a mesh axis ("jax.shard_map
// requires axis_names=... to be a subset of mesh.axis_names=..."), and
// when both are given and are not complements.
absl::StatusOr<std::vector<std::string>> ResolveManualAxes(
    const Mesh& mesh, const std::vector<std::string>& axis_names,
    const std::vector<std::string>& auto_axes);

// Whether every mesh axis is in `manual` (an empty `manual` means all).
bool AllManual(const Mesh& mesh, const std::vector<std::string>& manual);

// JAX prints the manual axes as a frozenset: frozenset({'x', 'y'}).
std::string ManualAxesText(const std::vector<std::string>& manual);

// JAX's check that specs name only manual axes: `prefix` is "in" or
// "out", `specs` one per argument/output or one for all (then its key path
// is empty). INVALID_ARGUMENT listing every offending entry:
// "shard_map in_specs argument must refer to an axis marked as manual
// (frozenset({'x'})), but:\n\n  in_specs[0] refers to 'y'\n\n...".
// OK when `manual` is empty (all axes manual).
absl::Status CheckSpecsManual(absl::string_view prefix,
                              const std::vector<PartitionSpec>& specs,
                              const std::vector<std::string>& manual);

// A collective (or axis_index/axis_size) over `axes` inside a partial-
// manual job: every axis must be manual. INVALID_ARGUMENT in JAX's words
// ("Found an unbound axis name: y. To fix this, please call psum under
// `jax.shard_map`."), saying the axis is auto. OK when `manual` is empty.
absl::Status CheckCollectiveManual(absl::string_view op,
                                   const std::vector<std::string>& axes,
                                   const std::vector<std::string>& manual);

}  // namespace shardmap

#endif  // SHARDMAP_CORE_MANUAL_AXES_H_
