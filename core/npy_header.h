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

// The header text and the data of a .npy file.
struct NpySections {
  absl::string_view header;
  absl::string_view data;
};

// Splits `bytes` (a whole file, or at least its whole header) after the
// header. Errors: INVALID_ARGUMENT naming `name` for a bad magic string,
// an unknown version, a header longer than the limit or truncated.
absl::StatusOr<NpySections> SplitNpySections(absl::string_view bytes,
                                             absl::string_view name);

// Interprets the header dict, which must have exactly the keys 'descr',
// 'fortran_order' and 'shape'. Errors: INVALID_ARGUMENT naming `name` for
// a malformed dict, a missing, duplicate or unexpected key, an unsupported
// dtype or a bad dimension.
absl::StatusOr<NpyArrayHeader> InterpretNpyHeader(absl::string_view text,
                                                  absl::string_view name);

// The data bytes `h` declares. INVALID_ARGUMENT naming `name` over 2^62.
absl::StatusOr<uint64_t> NpyDataBytes(const NpyArrayHeader& h,
                                      absl::string_view name);

}  // namespace shardmap

#endif  // SHARDMAP_CORE_NPY_HEADER_H_
