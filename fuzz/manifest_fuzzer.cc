// libFuzzer target: a checkpoint's manifest.json, as `restore` reads it
// from disk (server/checkpoint_manifest ParseCheckpointManifest). Any text
// must give a checked manifest or a clean DATA_LOSS, never a crash; a
// manifest that parses must write back to text that parses to the same
// arrays, with block files only at generated names inside the checkpoint.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/strings/match.h"
#include "core/array_name.h"
#include "server/checkpoint_manifest.h"

namespace {

using namespace shardmap;

void Check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  (void)IsCheckpointManifest(text);
  auto manifest = ParseCheckpointManifest(text, "manifest.json");
  if (!manifest.ok()) {
    Check(manifest.status().code() == absl::StatusCode::kDataLoss);
    Check(absl::StrContains(manifest.status().message(), "manifest.json"));
    return 0;
  }
  for (const CheckpointArray& a : manifest->arrays) {
    Check(ValidateArrayName(a.name).ok());
    for (const auto& [block, file] : a.files) {
      Check(ValidateArrayName(file).ok());  // relative, no '..'
    }
  }
  const std::string again = SerializeCheckpointManifest(*manifest);
  auto reread = ParseCheckpointManifest(again, "again");
  Check(reread.ok());
  Check(reread->arrays.size() == manifest->arrays.size());
  for (size_t i = 0; i < reread->arrays.size(); ++i) {
    const CheckpointArray& a = manifest->arrays[i];
    const CheckpointArray& b = reread->arrays[i];
    Check(a.name == b.name && a.meta.dtype == b.meta.dtype &&
          a.meta.shape == b.meta.shape &&
          a.mesh.ToString() == b.mesh.ToString() &&
          a.spec.ToString() == b.spec.ToString() && a.digests == b.digests);
  }
  return 0;
}
