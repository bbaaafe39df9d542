// The .npy file format (numpy.lib.format): reading and writing one array.
//
// Reading accepts format versions 1.0, 2.0 and 3.0, the dtypes float32,
// float64, int32 and int64 in any byte order ('<', '>', '='), and Fortran
// order; the result is always a C-order, little-endian Tensor. Everything else
// (object arrays, structured dtypes, bool, float16, complex, unsigned, ...)
// is refused: shardmap never unpickles. Writing produces exactly the bytes
// numpy.save (numpy 1.24) writes for the same array.
//
// Thread-safe: the functions share no state.
#ifndef SHARDMAP_CORE_NPY_H_
#define SHARDMAP_CORE_NPY_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/tensor.h"

namespace shardmap {

// Decodes the contents of a .npy file. `name` (usually the path) is quoted in
// every error message.
// Errors: INVALID_ARGUMENT for a bad magic string, an unknown version, a
//   header that is truncated, too long or not a valid dict literal, an
//   unsupported dtype, a negative, non-integer or overflowing dimension,
//   missing or trailing data bytes. RESOURCE_EXHAUSTED if the array cannot
//   be allocated.
absl::StatusOr<Tensor> ParseNpy(absl::string_view bytes,
                                absl::string_view name);

// Bytes a .npy file's magic, version, length field and longest header take:
// enough of the file's start for NpyDeclaredSize.
inline constexpr size_t kNpyMaxHeadBytes = 12 + (size_t{1} << 20);

// The size in bytes of the whole .npy file that starts with `head` (its
// header plus the data its dtype and shape declare), from the header alone:
// lets a reader check a stream's length before reading the data. `head`
// must hold the whole header (the file's first kNpyMaxHeadBytes bytes, or
// all of a shorter file).
// Errors: INVALID_ARGUMENT as ParseNpy for the header (bad magic, version,
//   dict, dtype or shape, or a truncated header).
absl::StatusOr<uint64_t> NpyDeclaredSize(absl::string_view head,
                                         absl::string_view name);

// Reads and decodes the .npy file at `path`.
// Errors: NOT_FOUND "input file '<path>' does not exist"; INVALID_ARGUMENT if
//   the file cannot be read (a directory, no permission, I/O error) and
//   everything ParseNpy returns.
absl::StatusOr<Tensor> ReadNpy(const std::string& path);

// The bytes numpy.save would write for `tensor`: a version 1.0 header (2.0
// if it would exceed 65535 bytes) padded so the data starts on a 64-byte
// boundary, then the little-endian C-order data.
std::string SerializeNpy(const Tensor& tensor);

// The header that SerializeNpy's output starts with; the tensor's bytes
// follow it. For writers that stream the data (npz.cc).
std::string NpyHeader(const Tensor& tensor);

// The tensor's data as bytes (a view of its buffer): what follows
// NpyHeader(tensor) in the file.
absl::string_view TensorBytes(const Tensor& tensor);

// Writes SerializeNpy(tensor) to `path` with WriteFileAtomically
// (core/atomic_file.h): a temporary file, synced, renamed over `path`.
// Errors: FAILED_PRECONDITION naming the step, the path and the system's
//   reason if the file cannot be created, written or renamed (e.g. its
//   directory does not exist).
absl::Status WriteNpy(const std::string& path, const Tensor& tensor);

}  // namespace shardmap

#endif  // SHARDMAP_CORE_NPY_H_
