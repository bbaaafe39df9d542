// The rules of jax.lax's collectives that can be checked from shapes and
// arguments alone, shared by the coordinator (before anything runs) and
// the workers' communicator (so both say the same thing).
//
// Every function returns INVALID_ARGUMENT naming the op, the argument and
// the value; messages follow JAX's where JAX has one.
#ifndef SHARDMAP_CORE_COLLECTIVE_RULES_H_
#define SHARDMAP_CORE_COLLECTIVE_RULES_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/mesh.h"
#include "core/tensor.h"

namespace shardmap {

// The axes of a collective: one name, or a list (a tuple in JAX), first
// major. Returns their positions in the mesh. Errors: an axis the mesh
// lacks, an axis named twice. No axes (JAX's `()`) is a group of one
// device: every collective over it is the identity (untiled all_gather
// and all_to_all add or move a dimension of size 1).
absl::StatusOr<std::vector<int>> ResolveAxes(
    absl::string_view op, const Mesh& mesh,
    const std::vector<std::string>& axes);
// Axes from the "axes" keyword argument (a string or a list of strings).
absl::StatusOr<std::vector<std::string>> AxesFromJson(
    absl::string_view op, const nlohmann::json& axes);
// The number of devices in a group over `positions`.
int64_t GroupSize(const Mesh& mesh, const std::vector<int>& positions);
// "('x', 'y')" - how messages print a tuple of axes.
std::string AxesText(const std::vector<std::string>& axes);

// all_gather: `axis` must be in [-(rank+1), rank] untiled (a new dimension
// is inserted there) or [-rank, rank-1] tiled. Returns it made
// non-negative.
absl::StatusOr<int> CheckAllGather(const Shape& shape, int64_t axis,
                                   bool tiled);
// psum_scatter: the scatter dimension must exist; tiled, its size must be
// divisible by the group size; untiled, equal to it.
absl::StatusOr<int> CheckPsumScatter(const Shape& shape, int64_t dimension,
                                     bool tiled, int64_t group_size);
// ppermute: pairs of group indices in [0, group_size), no source and no
// destination twice.
absl::StatusOr<std::vector<std::pair<int, int>>> CheckPermutation(
    const nlohmann::json& perm, int64_t group_size);
// ppermute over a tuple of axes: the axes must be in the mesh's order, as
// JAX requires ("it leads to wrong answers" otherwise).
absl::Status CheckPpermuteAxesOrder(const Mesh& mesh,
                                    const std::vector<std::string>& axes);
// all_to_all: split_axis must exist, with a size divisible by the group
// size (tiled) or equal to it (untiled); concat_axis must be a valid
// position in the result. Returns both made non-negative.
absl::StatusOr<std::pair<int, int>> CheckAllToAll(const Shape& shape,
                                                  int64_t split_axis,
                                                  int64_t concat_axis,
                                                  bool tiled,
                                                  int64_t group_size);

// Checks a call of a function whose signature declares `collective` (the
// jax.lax op it performs on args[0] with its keyword arguments: "psum",
// "all_gather", ... or "axes" for one that only names axes), given the
// arguments' block shapes. OK for an empty `collective`. `manual_axes`
// (empty: all) are the axes a partial-manual job's collectives may name
// (core/manual_axes.h).
absl::Status CheckCollectiveCall(
    absl::string_view function, absl::string_view collective, const Mesh& mesh,
    const std::vector<Shape>& block_shapes, const nlohmann::json& kwargs,
    const std::vector<std::string>& manual_axes = {});

}  // namespace shardmap

#endif  // SHARDMAP_CORE_COLLECTIVE_RULES_H_
