// A checkpoint's manifest.json: what each array is (name, dtype, shape,
// mesh, spec) and a digest per distinct block, and where the block files
// are. The manifest comes from disk and may have been edited or damaged,
// so parsing checks every field; the block files are always at names
// generated from the array's position and block number (CheckpointBlockFile),
// never taken from the manifest.
//
// Format "shardmap-checkpoint-v2" (written): blocks at
// "blocks/<array index>-<block>.npy". "shardmap-checkpoint-v1" (read only):
// "arrays/<name>/block-<block>.npy".
//
// Pure functions; thread-safe.
#ifndef SHARDMAP_SERVER_CHECKPOINT_MANIFEST_H_
#define SHARDMAP_SERVER_CHECKPOINT_MANIFEST_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/block_math.h"
#include "core/mesh.h"
#include "core/partition_spec.h"
#include "core/tensor.h"
#include "wire/proto_convert.h"

namespace shardmap {

inline constexpr char kCheckpointFormatV1[] = "shardmap-checkpoint-v1";
inline constexpr char kCheckpointFormatV2[] = "shardmap-checkpoint-v2";
// A manifest larger than this is refused unread.
inline constexpr uint64_t kMaxManifestBytes = 64 << 20;

struct CheckpointArray {
  std::string name;
  ArrayMeta meta;
  Mesh mesh = *Mesh::Create({{"x", 1}});
  PartitionSpec spec;
  // Every distinct block of the layout: its digest and file (relative to
  // the checkpoint directory).
  std::map<int64_t, uint64_t> digests;
  std::map<int64_t, std::string> files;
};

struct CheckpointManifest {
  int version = 2;
  std::vector<CheckpointArray> arrays;
};

// The file of block `block` of the array at position `index`, relative to
// the checkpoint directory. Always passes ValidateArrayName.
std::string CheckpointBlockFile(int version, size_t index,
                                const std::string& name, int64_t block);

// Parses and checks the text of `file` (named in every error).
// Errors: DATA_LOSS "checkpoint manifest <file>: <field>: <why>" for text
// that is not JSON or nested too deep, an unknown format, a missing
// "arrays" or one that is not a list, and per array a bad or repeated name
// (ValidateArrayName), dtype, shape, mesh or spec, a spec the shape does
// not divide, a block number out of range, repeated or missing, a file
// other than the generated one, or a digest that is not a decimal 64-bit
// number.
absl::StatusOr<CheckpointManifest> ParseCheckpointManifest(
    absl::string_view text, absl::string_view file);

// Whether `text` is a JSON object whose "format" is a checkpoint format
// (however damaged the rest): what `save` may replace.
bool IsCheckpointManifest(absl::string_view text);

// The manifest's JSON text, in format v2 (files as CheckpointBlockFile).
std::string SerializeCheckpointManifest(const CheckpointManifest& manifest);

}  // namespace shardmap

#endif  // SHARDMAP_SERVER_CHECKPOINT_MANIFEST_H_
