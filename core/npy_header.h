// The .npy header (internal to core/npy.cc and core/npy_header.cc). A file
// is the magic "\x93NUMPY", a major and minor version byte, the header length
// (uint16 LE in 1.0, uint32 LE in 2.0 and 3.0), the header (a Python dict
// literal, latin1 in 1.0/2.0, utf8 in 3.0, padded with spaces and a '\n' so
// the data is 64-byte aligned), then the raw data. Writing the header is
// NpyHeader in core/npy.h.
//
// Thread-safe: the functions share no state.
#ifndef SHARDMAP_CORE_NPY_HEADER_H_
#define SHARDMAP_CORE_NPY_HEADER_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/dtype.h"
#include "core/tensor.h"

namespace shardmap {

// INVALID_ARGUMENT "invalid .npy file '<name>': <problem...>".
template <typename... Args>
absl::Status InvalidNpy(absl::string_view name, const Args&... problem) {
  return absl::InvalidArgumentError(
      absl::StrCat("invalid .npy file '", name, "': ", problem...));
}

// What a header declares about its data.
struct NpyArrayHeader {
  DType dtype;
  bool byteswap;  // the data is big-endian
  bool fortran_order;
  Shape shape;
};

// A .npy file's header and where its data starts.
struct NpyLayout {
  NpyArrayHeader header;
  uint64_t data_offset;    // bytes before the data: magic to padding
  uint64_t data_bytes;     // what the header declares, checked <= 2^62
  absl::string_view data;  // what `bytes` holds after the header
};

// Reads the header at the start of `bytes` (a whole file, or at least its
// whole header), which must have exactly the keys 'descr',
// 'fortran_order' and 'shape'.
// Errors: INVALID_ARGUMENT naming `name` for a bad magic string, an unknown
//   version, a header that is longer than the limit or truncated, a
//   malformed dict, a missing, duplicate or unexpected key, an unsupported
//   dtype, a bad dimension or data over 2^62 bytes.
absl::StatusOr<NpyLayout> ReadNpyLayout(absl::string_view bytes,
                                        absl::string_view name);

}  // namespace shardmap

#endif  // SHARDMAP_CORE_NPY_HEADER_H_
