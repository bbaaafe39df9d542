// The .npz format (numpy.savez / numpy.savez_compressed): a zip archive with
// one .npy member per array, "<key>.npy". Keys may contain '/', as in
// "mlp/linear1/kernel".
//
// Thread-safe: the functions share no state; every write uses its own
// temporary file.
#ifndef SHARDMAP_CORE_NPZ_H_
#define SHARDMAP_CORE_NPZ_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/tensor.h"

namespace shardmap {

// ReadNpz's default limit on an archive's decompressed size: 16 GiB, the
// coordinator's default --max-job-bytes.
inline constexpr uint64_t kDefaultMaxNpzBytes = uint64_t{16} << 30;

// Reads every array of the archive at `path`, in archive order, keyed by the
// member name without its ".npy" suffix. Reads stored and deflated members;
// directory entries are skipped. Sizes are checked before anything is
// inflated: the members' sizes in the zip directory may total at most
// `max_bytes`, and each must equal what its .npy header declares; a
// member's stream is never inflated past that size (a zip bomb is refused
// after the bytes it declared, not read to its end).
// Errors: NOT_FOUND "input file '<path>' does not exist"; INVALID_ARGUMENT if
//   the file is not a readable zip archive, a member is not named "*.npy",
//   is duplicated or cannot be decompressed, the sizes are over `max_bytes`,
//   disagree or are exceeded, and everything ParseNpy returns
//   for a member (its name is given as "<path>:<member>"). RESOURCE_EXHAUSTED
//   if an array cannot be allocated.
absl::StatusOr<std::vector<std::pair<std::string, Tensor>>> ReadNpz(
    const std::string& path, uint64_t max_bytes = kDefaultMaxNpzBytes);

// Writes `arrays` (key, borrowed tensor) as an archive numpy.load reads,
// members in the given order, deflated if `compress` else stored. Written
// to a temporary file that replaces `path` (core/atomic_file.h).
// Errors: INVALID_ARGUMENT for an empty or duplicate key or a null tensor;
//   FAILED_PRECONDITION naming the path if the file cannot be created,
//   written or renamed.
absl::Status WriteNpz(
    const std::string& path,
    const std::vector<std::pair<std::string, const Tensor*>>& arrays,
    bool compress);

}  // namespace shardmap

#endif  // SHARDMAP_CORE_NPZ_H_
