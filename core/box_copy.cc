#include "core/box_copy.h"

#include <algorithm>
#include <cstring>

namespace shardmap {
namespace {

// Byte strides of a dense C-order array of `shape`.
std::vector<size_t> Strides(const Shape& shape, size_t item) {
  std::vector<size_t> s(shape.size(), item);
  for (int d = static_cast<int>(shape.size()) - 2; d >= 0; --d) {
    s[d] = s[d + 1] * shape[d + 1];
  }
  return s;
}

}  // namespace

bool Intersect(const Box& a, const Box& b, Box* out) {
  out->origin.assign(a.origin.size(), 0);
  out->shape.assign(a.shape.size(), 0);
  for (size_t d = 0; d < a.shape.size(); ++d) {
    const int64_t lo = std::max(a.origin[d], b.origin[d]);
    const int64_t hi =
        std::min(a.origin[d] + a.shape[d], b.origin[d] + b.shape[d]);
    if (hi <= lo) return false;
    out->origin[d] = lo;
    out->shape[d] = hi - lo;
  }
  return true;
}

void CopyBox(const uint8_t* src, const Box& src_box, uint8_t* dst,
             const Box& dst_box, const Box& box, size_t item_size) {
  const int rank = static_cast<int>(box.shape.size());
  if (rank == 0) {
    std::memcpy(dst, src, item_size);
    return;
  }
  if (NumElements(box.shape) == 0) return;
  const std::vector<size_t> ss = Strides(src_box.shape, item_size);
  const std::vector<size_t> ds = Strides(dst_box.shape, item_size);
  const size_t run = box.shape[rank - 1] * item_size;
  // An odometer over every dimension but the last; each step copies one
  // contiguous row of the box.
  std::vector<int64_t> i(rank, 0);
  while (true) {
    size_t so = 0, doff = 0;
    for (int d = 0; d < rank; ++d) {
      const int64_t g = box.origin[d] + i[d];
      so += (g - src_box.origin[d]) * ss[d];
      doff += (g - dst_box.origin[d]) * ds[d];
    }
    std::memcpy(dst + doff, src + so, run);
    int d = rank - 2;
    while (d >= 0 && ++i[d] == box.shape[d]) i[d--] = 0;
    if (d < 0) return;
  }
}

}  // namespace shardmap
