#include "client/array_command_util.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/exit_codes.h"
#include "client/resident_display.h"
#include "core/block_math.h"
#include "wire/proto_convert.h"

namespace shardmap {

std::string ArrayName(const std::string& text) {
  return absl::StartsWith(text, "@") ? text.substr(1) : text;
}

int ArrayExitCode(const absl::Status& s) {
  return s.code() == absl::StatusCode::kNotFound ? kExitDataErr
                                                 : ExitCodeForStatus(s);
}

std::optional<std::string> Conflict(
    const std::vector<v1::ResidentInfo>& existing, const std::string& name,
    const Tensor& t, const Mesh& mesh, const PartitionSpec& spec) {
  for (const auto& info : existing) {
    if (info.name() != name) continue;
    auto meta = HeaderFromProto(info.header(), name);
    auto info_mesh = MeshFromProto(info.mesh());
    const PartitionSpec info_spec = SpecFromProto(info.spec());
    if (!meta.ok() || meta->dtype != t.dtype() || meta->shape != t.shape() ||
        !info_mesh.ok() ||
        !SameSharding(*info_mesh, info_spec, mesh, spec, t.shape().size())) {
      return absl::StrCat(ArrayText(info), " sharded ", info_spec.ToString(),
                          " over ", MeshText(info.mesh()));
    }
  }
  return std::nullopt;
}

// The exit code of a failed put of `t` as `name`: 73 (cannot create the
// output) when an array of another dtype, shape or sharding holds the
// name, as opposed to a lost worker (69).
int PutExitCode(const ShardClient& client, const absl::Status& s,
                const std::string& name, const Tensor& t, const Mesh& mesh,
                const PartitionSpec& spec) {
  if (s.code() == absl::StatusCode::kFailedPrecondition) {
    auto existing = client.List(name);
    if (existing.ok() && Conflict(*existing, name, t, mesh, spec).has_value()) {
      return kExitCantCreate;
    }
  }
  return ArrayExitCode(s);
}

absl::StatusOr<Mesh> ParseMeshFlag(const std::string& text) {
  auto mesh = Mesh::Parse(text);
  if (!mesh.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--mesh: ", mesh.status().message()));
  }
  return mesh;
}

absl::StatusOr<std::unique_ptr<ShardClient>> Connect(const std::string& address,
                                                     int retries) {
  ShardClient::Options options;
  options.address = address;
  options.retries = retries;
  return ShardClient::Create(options);
}

}  // namespace shardmap
