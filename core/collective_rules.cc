#include "core/collective_rules.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/manual_axes.h"
#include "core/status_util.h"

namespace shardmap {
namespace {

std::string Quoted(const std::vector<std::string>& names) {
  std::vector<std::string> q;
  for (const auto& n : names) q.push_back(absl::StrCat("'", n, "'"));
  return absl::StrCat("(", absl::StrJoin(q, ", "),
                      names.size() == 1 ? ",)" : ")");
}

// Python-style index normalization: -1 is the last of `size` positions.
absl::StatusOr<int> Normalize(absl::string_view op, absl::string_view what,
                              int64_t index, int64_t size) {
  if (index < -size || index >= size) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": ", what, " ", index, " is out of range; it must be in [", -size,
        ", ", size - 1, "]"));
  }
  return static_cast<int>(index < 0 ? index + size : index);
}

}  // namespace

std::string AxesText(const std::vector<std::string>& axes) {
  return Quoted(axes);
}

absl::StatusOr<std::vector<std::string>> AxesFromJson(
    absl::string_view op, const nlohmann::json& axes) {
  if (axes.is_string())
    return std::vector<std::string>{axes.get<std::string>()};
  std::vector<std::string> out;
  if (axes.is_array()) {
    for (const auto& a : axes) {
      if (!a.is_string()) break;
      out.push_back(a.get<std::string>());
    }
    if (out.size() == axes.size()) return out;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      op, ": axes must be an axis name or a list of axis names, got ",
      axes.dump()));
}

absl::StatusOr<std::vector<int>> ResolveAxes(
    absl::string_view op, const Mesh& mesh,
    const std::vector<std::string>& axes) {
  // No axes (JAX's empty tuple): a group of one device, so psum(x, ())
  // is x, axis_size(()) is 1 and axis_index(()) is 0.
  std::vector<int> positions;
  std::set<std::string> seen;
  for (const std::string& a : axes) {
    auto pos = mesh.AxisPosition(a);
    if (!pos.has_value()) {
      std::vector<std::string> names;
      for (const MeshAxis& m : mesh.axes()) names.push_back(m.name);
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": found an unbound axis name: '", a,
                       "'; the mesh has axes ", Quoted(names)));
    }
    if (!seen.insert(a).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          op, ": axis '", a, "' appears twice in axes ", Quoted(axes)));
    }
    positions.push_back(*pos);
  }
  return positions;
}

int64_t GroupSize(const Mesh& mesh, const std::vector<int>& positions) {
  int64_t n = 1;
  for (int p : positions) n *= mesh.axes()[p].size;
  return n;
}

absl::StatusOr<int> CheckAllGather(const Shape& shape, int64_t axis,
                                   bool tiled) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  if (tiled && rank == 0) {
    return absl::InvalidArgumentError(
        "all_gather: tiled=true needs an array of rank >= 1; got a scalar");
  }
  return Normalize("all_gather", "axis", axis, tiled ? rank : rank + 1);
}

absl::StatusOr<int> CheckPsumScatter(const Shape& shape, int64_t dimension,
                                     bool tiled, int64_t group_size) {
  SHARD_ASSIGN_OR_RETURN(
      int d, Normalize("psum_scatter", "scatter_dimension", dimension,
                       static_cast<int64_t>(shape.size())));
  if (tiled && shape[d] % group_size != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "psum_scatter: tiled reduce_scatter operand scatter dimension size ",
        shape[d], " must be divisible by shard_count ", group_size));
  }
  if (!tiled && shape[d] != group_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "psum_scatter: reduce_scatter operand scatter dimension size ",
        shape[d], " must match shard count ", group_size,
        " (or pass tiled=true)"));
  }
  return d;
}

absl::StatusOr<std::vector<std::pair<int, int>>> CheckPermutation(
    const nlohmann::json& perm, int64_t group_size) {
  std::vector<std::pair<int, int>> pairs;
  std::set<int64_t> sources, destinations;
  if (!perm.is_array()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ppermute: `perm` passed to `jax.lax.ppermute` must be a list or a "
        "tuple. Got perm of type ",
        perm.type_name(), ": ", perm.dump()));
  }
  for (const auto& p : perm) {
    if (!p.is_array() || p.size() != 2 || !p[0].is_number_integer() ||
        !p[1].is_number_integer()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ppermute: perm must be a list of [source, destination] pairs, "
          "got ",
          perm.dump()));
    }
    const int64_t src = p[0].get<int64_t>(), dst = p[1].get<int64_t>();
    for (int64_t i : {src, dst}) {
      if (i < 0 || i >= group_size) {
        return absl::InvalidArgumentError(
            absl::StrCat("ppermute: index ", i, " in perm ", perm.dump(),
                         " is outside the group of ", group_size,
                         " devices [0, ", group_size - 1, "]"));
      }
    }
    if (!sources.insert(src).second || !destinations.insert(dst).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("ppermute sources and destinations must be unique, got ",
                       perm.dump()));
    }
    pairs.emplace_back(static_cast<int>(src), static_cast<int>(dst));
  }
  return pairs;
}

absl::Status CheckPpermuteAxesOrder(const Mesh& mesh,
                                    const std::vector<std::string>& axes) {
  int last = -1;
  for (const std::string& a : axes) {
    auto pos = mesh.AxisPosition(a);
    if (!pos.has_value()) continue;  // ResolveAxes reports unknown axes
    if (*pos < last) {
      std::vector<std::string> names;
      for (const MeshAxis& m : mesh.axes()) names.push_back(m.name);
      return absl::InvalidArgumentError(absl::StrCat(
          "ppermute: axes ", Quoted(axes),
          " are not in the order the mesh declares them ", Quoted(names),
          "; pass them in mesh order (JAX refuses this too, as it leads to "
          "wrong answers)"));
    }
    last = *pos;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::pair<int, int>> CheckAllToAll(const Shape& shape,
                                                  int64_t split_axis,
                                                  int64_t concat_axis,
                                                  bool tiled,
                                                  int64_t group_size) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  SHARD_ASSIGN_OR_RETURN(
      int s, Normalize("all_to_all", "split_axis", split_axis, rank));
  // Untiled, the split dimension goes away and a new one of size n is
  // inserted at concat_axis: positions in a result of the same rank.
  SHARD_ASSIGN_OR_RETURN(
      int c, Normalize("all_to_all", "concat_axis", concat_axis, rank));
  if (tiled && shape[s] % group_size != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("all_to_all: the size of split_axis (", shape[s],
                     ") has to be divisible by the size of the named axis (",
                     group_size, ")"));
  }
  if (!tiled && shape[s] != group_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "all_to_all requires the size of the mapped axis to equal "
        "x.shape[split_axis], but they are ",
        group_size, " and ", shape[s], " respectively (or pass tiled=true)"));
  }
  return std::make_pair(s, c);
}

absl::Status CheckCollectiveCall(absl::string_view function,
                                 absl::string_view collective, const Mesh& mesh,
                                 const std::vector<Shape>& block_shapes,
                                 const nlohmann::json& kwargs,
                                 const std::vector<std::string>& manual_axes) {
  if (collective.empty()) return absl::OkStatus();
  if (!kwargs.contains("axes")) return absl::OkStatus();
  SHARD_ASSIGN_OR_RETURN(std::vector<std::string> axes,
                         AxesFromJson(function, kwargs["axes"]));
  SHARD_ASSIGN_OR_RETURN(std::vector<int> positions,
                         ResolveAxes(function, mesh, axes));
  SHARD_RETURN_IF_ERROR(CheckCollectiveManual(function, axes, manual_axes));
  const int64_t n = GroupSize(mesh, positions);
  if (block_shapes.empty()) return absl::OkStatus();
  const Shape& x = block_shapes[0];
  auto int_kwarg = [&](const char* name, int64_t fallback) {
    return kwargs.contains(name) && kwargs[name].is_number_integer()
               ? kwargs[name].get<int64_t>()
               : fallback;
  };
  const bool tiled = kwargs.contains("tiled") && kwargs["tiled"].is_boolean() &&
                     kwargs["tiled"].get<bool>();
  absl::Status s;
  if (collective == "all_gather") {
    s = CheckAllGather(x, int_kwarg("axis", 0), tiled).status();
  } else if (collective == "psum_scatter") {
    s = CheckPsumScatter(x, int_kwarg("scatter_dimension", 0), tiled, n)
            .status();
  } else if (collective == "ppermute") {
    s = CheckPpermuteAxesOrder(mesh, axes);
    if (s.ok()) {
      s = CheckPermutation(kwargs.value("perm", nlohmann::json::array()), n)
              .status();
    }
  } else if (collective == "all_to_all") {
    s = CheckAllToAll(x, int_kwarg("split_axis", 0),
                      int_kwarg("concat_axis", 0), tiled, n)
            .status();
  }
  return s;
}

}  // namespace shardmap
