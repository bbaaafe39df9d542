#include "core/manual_axes.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status_util.h"

namespace shardmap {
namespace {

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::string QuotedJoin(const std::vector<std::string>& names) {
  return absl::StrJoin(names, ", ", [](std::string* out, const std::string& n) {
    absl::StrAppend(out, "'", n, "'");
  });
}

// Python's repr of a set of names, e.g. {'x', 'y'}.
std::string SetText(const std::vector<std::string>& names) {
  return absl::StrCat("{", QuotedJoin(names), "}");
}

std::vector<std::string> MeshNames(const Mesh& mesh) {
  std::vector<std::string> names;
  for (const MeshAxis& a : mesh.axes()) names.push_back(a.name);
  return names;
}

// Refuses `names` unless all are mesh axes.
absl::Status CheckSubset(const Mesh& mesh, absl::string_view field,
                         const std::vector<std::string>& names) {
  for (const std::string& n : names) {
    if (mesh.AxisPosition(n).has_value()) continue;
    std::vector<std::string> unique;
    for (const std::string& m : names) {
      if (!Contains(unique, m)) unique.push_back(m);
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "jax.shard_map requires ", field, "=", SetText(unique),
        " to be a subset of mesh.axis_names=", SetText(MeshNames(mesh)), "; '",
        n, "' is not an axis of the mesh ", mesh.ToString()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ResolveManualAxes(
    const Mesh& mesh, const std::vector<std::string>& axis_names,
    const std::vector<std::string>& auto_axes) {
  SHARD_RETURN_IF_ERROR(CheckSubset(mesh, "axis_names", axis_names));
  SHARD_RETURN_IF_ERROR(CheckSubset(mesh, "auto", auto_axes));
  std::vector<std::string> manual;
  for (const MeshAxis& a : mesh.axes()) {
    const bool named = axis_names.empty() || Contains(axis_names, a.name);
    const bool is_auto = Contains(auto_axes, a.name);
    if (!axis_names.empty() && !auto_axes.empty() && named == is_auto) {
      return absl::InvalidArgumentError(absl::StrCat(
          "axis_names=", SetText(axis_names), " and auto=", SetText(auto_axes),
          " must be complements in mesh.axis_names=", SetText(MeshNames(mesh)),
          ", but mesh axis '", a.name, "' is ",
          named ? "in both" : "in neither",
          "; give only one of --axis-names and --auto"));
    }
    if (named && !is_auto) manual.push_back(a.name);
  }
  if (manual.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "auto=", SetText(auto_axes), " leaves no manual axis in mesh ",
        mesh.ToString(), "; at least one axis must be manual"));
  }
  return manual;
}

bool AllManual(const Mesh& mesh, const std::vector<std::string>& manual) {
  if (manual.empty()) return true;
  for (const MeshAxis& a : mesh.axes()) {
    if (!Contains(manual, a.name)) return false;
  }
  return true;
}

std::string ManualAxesText(const std::vector<std::string>& manual) {
  return absl::StrCat("frozenset(", SetText(manual), ")");
}

absl::Status CheckSpecsManual(absl::string_view prefix,
                              const std::vector<PartitionSpec>& specs,
                              const std::vector<std::string>& manual) {
  if (manual.empty()) return absl::OkStatus();
  std::vector<std::string> messages;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].unsplit()) continue;
    for (const std::string& axis : specs[i].MentionedAxes()) {
      if (Contains(manual, axis)) continue;
      messages.push_back(
          absl::StrCat("  ", prefix, "_specs",
                       specs.size() == 1 ? "" : absl::StrCat("[", i, "]"),
                       " refers to '", axis, "'"));
    }
  }
  if (messages.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "shard_map ", prefix,
      "_specs argument must refer to an axis marked as manual (",
      ManualAxesText(manual), "), but:\n\n", absl::StrJoin(messages, "\n\n"),
      "\n\nCheck the ", prefix, "_specs values passed to shard_map."));
}

absl::Status CheckCollectiveManual(absl::string_view op,
                                   const std::vector<std::string>& axes,
                                   const std::vector<std::string>& manual) {
  if (manual.empty()) return absl::OkStatus();
  for (const std::string& axis : axes) {
    if (Contains(manual, axis)) continue;
    return absl::InvalidArgumentError(absl::StrCat(
        "Found an unbound axis name: ", axis, ". To fix this, please call ", op,
        " under `jax.shard_map`. ('", axis,
        "' is an auto axis of this job; its manual axes are ",
        ManualAxesText(manual), ")"));
  }
  return absl::OkStatus();
}

}  // namespace shardmap
