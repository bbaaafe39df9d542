// The parts of planning that decide a job's mesh and axes: the mesh and
// in_specs taken from resident arguments (JAX's Infer: a jax.Array
// carries its sharding), and the manual axes of a partial-manual job
// (JAX's axis_names / auto).
//
// Pure logic; thread-compatible.
#ifndef SHARDMAP_SERVER_JOB_AXES_H_
#define SHARDMAP_SERVER_JOB_AXES_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/mesh.h"
#include "core/partition_spec.h"
#include "server/resident_index.h"
#include "shardmap/v1/coordinator.pb.h"

namespace shardmap {

// The job's mesh: spec.mesh when set, else the one mesh every resident
// argument lives on. INVALID_ARGUMENT for a bad mesh, for no mesh and no
// resident argument, and for resident arguments on different meshes
// (naming both); NOT_FOUND / FAILED_PRECONDITION from `index` for an
// unknown or lost resident argument.
absl::StatusOr<Mesh> JobMesh(const v1::JobSpec& spec,
                             const ResidentIndex* index);

// The in_specs of the job as sent, with `Infer` entries (and no in_specs
// at all when every argument is resident) kept as Infer; the caller
// resolves them per argument with InferredSpec. INVALID_ARGUMENT when
// in_specs are missing and some argument is not resident.
absl::StatusOr<std::vector<v1::PartitionSpec>> InSpecsOrInfer(
    const v1::JobSpec& spec);

// The spec of argument `i` whose in_spec is Infer: its resident array's
// own spec, which must be over the job's mesh. INVALID_ARGUMENT naming
// the argument when it is not resident or lives on another mesh.
absl::StatusOr<PartitionSpec> InferredSpec(
    int i, const std::optional<ResidentArray>& resident, const Mesh& mesh);

// The manual axes (mesh order) of the job, or empty when every axis is
// manual. Errors as ResolveManualAxes (core/manual_axes.h).
absl::StatusOr<std::vector<std::string>> JobManualAxes(const v1::JobSpec& spec,
                                                       const Mesh& mesh);

}  // namespace shardmap

#endif  // SHARDMAP_SERVER_JOB_AXES_H_
