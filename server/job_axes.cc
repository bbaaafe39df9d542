#include "server/job_axes.h"

#include "absl/strings/str_cat.h"
#include "core/manual_axes.h"
#include "core/status_util.h"
#include "wire/proto_convert.h"

namespace shardmap {
namespace {

bool IsResidentArg(const v1::JobSpec& spec, int i) {
  return i < spec.resident_args_size() && !spec.resident_args(i).empty();
}

}  // namespace

absl::StatusOr<Mesh> JobMesh(const v1::JobSpec& spec,
                             const ResidentIndex* index) {
  if (spec.has_mesh()) {
    auto mesh = MeshFromProto(spec.mesh());
    if (!mesh.ok()) return Annotate(mesh.status(), "mesh");
    return mesh;
  }
  std::optional<ResidentArray> first;
  int first_arg = -1;
  for (int i = 0; i < spec.args_size(); ++i) {
    if (!IsResidentArg(spec, i) || index == nullptr) continue;
    SHARD_ASSIGN_OR_RETURN(ResidentArray a, index->Find(spec.resident_args(i)));
    if (!first.has_value()) {
      first = std::move(a);
      first_arg = i;
    } else if (!(a.mesh == first->mesh)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the job gives no mesh, and its resident arguments are on "
          "different meshes: args[",
          first_arg, "] ('", first->name, "') is on mesh ",
          first->mesh.ToString(), " but args[", i, "] ('", a.name,
          "') is on mesh ", a.mesh.ToString(),
          "; give --mesh (and in_specs) to reshard them onto one mesh"));
    }
  }
  if (!first.has_value()) {
    return absl::InvalidArgumentError(
        "mesh is missing: give --mesh (or set SHARDMAP_MESH, or a default "
        "mesh in the client), or pass resident arguments (@NAME), whose "
        "mesh is then used");
  }
  return first->mesh;
}

absl::StatusOr<std::vector<v1::PartitionSpec>> InSpecsOrInfer(
    const v1::JobSpec& spec) {
  std::vector<v1::PartitionSpec> specs(spec.in_specs().begin(),
                                       spec.in_specs().end());
  if (!specs.empty() || spec.args_size() == 0) return specs;
  for (int i = 0; i < spec.args_size(); ++i) {
    if (!IsResidentArg(spec, i)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "in_specs is missing: give one spec for all arguments or one per "
          "argument (--in-spec); they may be left out only when every "
          "argument is a resident array (args[",
          i, "] is not)"));
    }
  }
  v1::PartitionSpec infer;
  infer.set_infer(true);
  specs.push_back(infer);
  return specs;
}

absl::StatusOr<PartitionSpec> InferredSpec(
    int i, const std::optional<ResidentArray>& resident, const Mesh& mesh) {
  if (!resident.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "in_specs", "[", i, "] is Infer, but args[", i,
        "] is not a resident array: only a resident array carries a "
        "sharding to take; give its spec"));
  }
  if (!(resident->mesh == mesh)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "in_specs[", i, "] is Infer, but args[", i, "] (resident array '",
        resident->name, "') is on mesh ", resident->mesh.ToString(),
        ", not on the job's mesh ", mesh.ToString(),
        "; give its spec to reshard it onto the job's mesh"));
  }
  return resident->spec;
}

absl::StatusOr<std::vector<std::string>> JobManualAxes(const v1::JobSpec& spec,
                                                       const Mesh& mesh) {
  const std::vector<std::string> names(spec.axis_names().begin(),
                                       spec.axis_names().end());
  const std::vector<std::string> autos(spec.auto_axes().begin(),
                                       spec.auto_axes().end());
  if (names.empty() && autos.empty()) return std::vector<std::string>();
  SHARD_ASSIGN_OR_RETURN(std::vector<std::string> manual,
                         ResolveManualAxes(mesh, names, autos));
  if (AllManual(mesh, manual)) manual.clear();
  return manual;
}

}  // namespace shardmap
