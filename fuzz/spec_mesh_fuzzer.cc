// libFuzzer target: the mesh and PartitionSpec parsers (core/mesh,
// core/partition_spec) and a spec's validation against a mesh.
//
// Input: "MESH\nSPEC\nRANK" (any part may be missing or garbage). Whatever
// parses must print back to text that parses to the same value, and
// Validate must answer (OK or INVALID_ARGUMENT) for any rank.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "core/mesh.h"
#include "core/partition_spec.h"

namespace {

void Check(bool ok, const char* what, const std::string& text) {
  if (ok) return;
  std::fprintf(stderr, "spec_mesh_fuzzer: %s for input '%s'\n", what,
               text.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace shardmap;
  const std::string input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> parts =
      absl::StrSplit(input, absl::MaxSplits('\n', 2));
  parts.resize(3);

  absl::StatusOr<Mesh> mesh = Mesh::Parse(parts[0]);
  if (mesh.ok()) {
    Check(mesh->num_devices() >= 1 && mesh->num_devices() <= Mesh::kMaxDevices,
          "device count out of range", parts[0]);
    absl::StatusOr<Mesh> again = Mesh::Parse(mesh->ToString());
    Check(again.ok() && again->ToString() == mesh->ToString(),
          "mesh does not round-trip", parts[0]);
    for (int64_t d : {int64_t{0}, mesh->num_devices() - 1}) {
      Check(mesh->DeviceId(mesh->Coords(d)) == d, "coords do not round-trip",
            parts[0]);
    }
  }

  absl::StatusOr<PartitionSpec> spec = PartitionSpec::Parse(parts[1]);
  if (!spec.ok()) return 0;
  absl::StatusOr<PartitionSpec> again = PartitionSpec::Parse(spec->ToString());
  Check(again.ok() && *again == *spec, "spec does not round-trip", parts[1]);
  if (mesh.ok()) {
    const int rank = parts[2].empty() ? 0 : (parts[2][0] & 0x0f);
    absl::Status s = spec->Validate(*mesh, rank, "in_specs[0]", "args[0]");
    Check(s.ok() || s.code() == absl::StatusCode::kInvalidArgument,
          "Validate returned an unexpected code", input);
  }
  return 0;
}
