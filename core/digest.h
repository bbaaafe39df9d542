// A 64-bit digest of an array (dtype, shape and bytes), used to verify that
// replicas of an output agree without shipping every copy.
#ifndef SHARDMAP_CORE_DIGEST_H_
#define SHARDMAP_CORE_DIGEST_H_

#include <cstdint>

#include "core/tensor.h"

namespace shardmap {

// XXH3-64 over the dtype, the shape and the data. Equal arrays give equal
// digests on every machine; byte-different arrays (including 0.0 vs -0.0,
// or NaNs with different payloads) almost surely differ.
uint64_t Digest(const Tensor& tensor);

}  // namespace shardmap

#endif  // SHARDMAP_CORE_DIGEST_H_
