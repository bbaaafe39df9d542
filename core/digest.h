// A 64-bit digest of an array (dtype, shape and bytes), used to verify that
// replicas of an output agree without shipping every copy.
#ifndef SHARDMAP_CORE_DIGEST_H_
#define SHARDMAP_CORE_DIGEST_H_

#include <cstdint>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/tensor.h"

namespace shardmap {

// XXH3-64 over the dtype, the shape and the data. Equal arrays give equal
// digests on every machine; byte-different arrays (including 0.0 vs -0.0,
// or NaNs with different payloads) almost surely differ.
uint64_t Digest(const Tensor& tensor);

// XXH3-64 with `seed` over `pieces` as one run of bytes: the same however
// the bytes are cut into pieces.
uint64_t DigestPieces(uint64_t seed,
                      absl::Span<const absl::string_view> pieces);

}  // namespace shardmap

#endif  // SHARDMAP_CORE_DIGEST_H_
