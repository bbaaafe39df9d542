// Boxes of an array: copying the part two blocks have in common, for
// resharding a resident array from one sharding to another.
#ifndef SHARDMAP_CORE_BOX_COPY_H_
#define SHARDMAP_CORE_BOX_COPY_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace shardmap {

// A box in whole-array coordinates: [origin, origin + shape).
struct Box {
  std::vector<int64_t> origin;
  Shape shape;
};

// The common part of two boxes of the same rank; false if it is empty
// (a zero-sized box counts as empty unless both boxes are zero-sized
// along the same dimension - then there is nothing to copy anyway).
bool Intersect(const Box& a, const Box& b, Box* out);

// Copies `box` from `src` (dense C-order data of the box `src_box`) into
// `dst` (dense data of `dst_box`). Both boxes must contain `box`.
void CopyBox(const uint8_t* src, const Box& src_box, uint8_t* dst,
             const Box& dst_box, const Box& box, size_t item_size);

}  // namespace shardmap

#endif  // SHARDMAP_CORE_BOX_COPY_H_
