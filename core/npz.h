// The .npz format (numpy.savez / numpy.savez_compressed): a zip archive with
// one .npy member per array, "<key>.npy". Keys may contain '/', as in
// "mlp/linear1/kernel".
//
// Thread-safe: the functions share no state. Concurrent WriteNpz calls for
// the same path from one process must be serialized, as they share the
// temporary file name.
#ifndef SHARDMAP_CORE_NPZ_H_
#define SHARDMAP_CORE_NPZ_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/tensor.h"

namespace shardmap {

// Reads every array of the archive at `path`, in archive order, keyed by the
// member name without its ".npy" suffix. Reads stored and deflated members;
// directory entries are skipped.
// Errors: NOT_FOUND "input file '<path>' does not exist"; INVALID_ARGUMENT if
//   the file is not a readable zip archive, a member is not named "*.npy",
//   is duplicated or cannot be decompressed, and everything ParseNpy returns
//   for a member (its name is given as "<path>:<member>"). RESOURCE_EXHAUSTED
//   if an array cannot be allocated.
absl::StatusOr<std::vector<std::pair<std::string, Tensor>>> ReadNpz(
    const std::string& path);

// Writes `arrays` (key, borrowed tensor) as an archive numpy.load reads,
// members in the given order, deflated if `compress` else stored. Written to
// "<path>.tmp.<pid>" and then renamed over `path`.
// Errors: INVALID_ARGUMENT for an empty or duplicate key or a null tensor;
//   FAILED_PRECONDITION naming the path if the file cannot be created,
//   written or renamed.
absl::Status WriteNpz(
    const std::string& path,
    const std::vector<std::pair<std::string, const Tensor*>>& arrays,
    bool compress);

}  // namespace shardmap

#endif  // SHARDMAP_CORE_NPZ_H_
