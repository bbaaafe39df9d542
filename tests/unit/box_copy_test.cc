// Tests of core/box_copy: Intersect and CopyBox against a naive
// per-element reference, over random boxes of rank 0..4 (all kinds of
// overlap, touching edges, zero-sized dimensions, scalars) and a few
// hand-written cases.
#include "core/box_copy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace shardmap {
namespace {

constexpr uint8_t kFill = 0xee;

std::string BoxString(const Box& b) {
  return absl::StrCat("origin [", absl::StrJoin(b.origin, ","), "] shape [",
                      absl::StrJoin(b.shape, ","), "]");
}

// The reference intersection, dimension by dimension. `empty` if any
// dimension has no common extent (which includes any zero-sized one).
struct RefIntersection {
  Box box;
  bool empty = false;
};

RefIntersection NaiveIntersect(const Box& a, const Box& b) {
  RefIntersection r;
  for (size_t d = 0; d < a.shape.size(); ++d) {
    const int64_t lo = std::max(a.origin[d], b.origin[d]);
    const int64_t hi =
        std::min(a.origin[d] + a.shape[d], b.origin[d] + b.shape[d]);
    r.box.origin.push_back(lo);
    r.box.shape.push_back(std::max<int64_t>(0, hi - lo));
    if (hi <= lo) r.empty = true;
  }
  return r;
}

// True if some dimension is zero-sized in both boxes (then the contract
// lets Intersect report either way: there is nothing to copy).
bool BothZeroSomewhere(const Box& a, const Box& b) {
  for (size_t d = 0; d < a.shape.size(); ++d) {
    if (a.shape[d] == 0 && b.shape[d] == 0) return true;
  }
  return false;
}

// Calls f(index) for every multi-index of `shape`, in C order (once, with
// an empty index, for a scalar; never if a dimension is zero).
template <typename F>
void ForEachIndex(const Shape& shape, F f) {
  if (NumElements(shape) == 0) return;
  std::vector<int64_t> i(shape.size(), 0);
  while (true) {
    f(i);
    int d = static_cast<int>(shape.size()) - 1;
    while (d >= 0 && ++i[d] == shape[d]) i[d--] = 0;
    if (d < 0) return;
  }
}

// Offset of element `index` (relative to the box's origin) in dense C
// order.
int64_t LinearOffset(const Shape& shape, const std::vector<int64_t>& index) {
  int64_t off = 0;
  for (size_t d = 0; d < shape.size(); ++d) off = off * shape[d] + index[d];
  return off;
}

// Byte `j` of the source element at global coordinates `g`: distinct for
// nearby elements and bytes, never the destination's fill value.
uint8_t SourceByte(const std::vector<int64_t>& g, size_t j) {
  uint64_t h = 1469598103934665603ull;
  for (int64_t x : g) {
    h = (h ^ static_cast<uint64_t>(x + 1000)) * 1099511628211ull;
  }
  h = (h ^ j) * 1099511628211ull;
  const uint8_t v = static_cast<uint8_t>(h >> 24);
  return v == kFill ? 0x5a : v;
}

std::vector<int64_t> Global(const Box& b, const std::vector<int64_t>& i) {
  std::vector<int64_t> g(i.size());
  for (size_t d = 0; d < i.size(); ++d) g[d] = b.origin[d] + i[d];
  return g;
}

bool Contains(const Box& outer, const std::vector<int64_t>& g) {
  for (size_t d = 0; d < g.size(); ++d) {
    if (g[d] < outer.origin[d] || g[d] >= outer.origin[d] + outer.shape[d]) {
      return false;
    }
  }
  return true;
}

// Dense data of `box` filled with SourceByte.
std::vector<uint8_t> SourceData(const Box& box, size_t item) {
  std::vector<uint8_t> data(NumElements(box.shape) * item);
  ForEachIndex(box.shape, [&](const std::vector<int64_t>& i) {
    const std::vector<int64_t> g = Global(box, i);
    const int64_t off = LinearOffset(box.shape, i);
    for (size_t j = 0; j < item; ++j) data[off * item + j] = SourceByte(g, j);
  });
  return data;
}

// What `dst` must hold after copying `box` into data of `dst_box` that was
// all kFill: source bytes inside `box`, kFill elsewhere.
std::vector<uint8_t> Expected(const Box& dst_box, const Box& box, size_t item) {
  std::vector<uint8_t> data(NumElements(dst_box.shape) * item, kFill);
  ForEachIndex(dst_box.shape, [&](const std::vector<int64_t>& i) {
    const std::vector<int64_t> g = Global(dst_box, i);
    if (!Contains(box, g)) return;
    const int64_t off = LinearOffset(dst_box.shape, i);
    for (size_t j = 0; j < item; ++j) data[off * item + j] = SourceByte(g, j);
  });
  return data;
}

// Copies `box` from src_box to dst_box with CopyBox and compares every
// destination byte with the reference.
void CheckCopy(const Box& src_box, const Box& dst_box, const Box& box,
               size_t item) {
  const std::vector<uint8_t> src = SourceData(src_box, item);
  std::vector<uint8_t> dst(NumElements(dst_box.shape) * item, kFill);
  // Scalars and empty boxes have no bytes; give CopyBox valid pointers
  // anyway.
  uint8_t src_dummy[8] = {0}, dst_dummy[8] = {0};
  CopyBox(src.empty() ? src_dummy : src.data(), src_box,
          dst.empty() ? dst_dummy : dst.data(), dst_box, box, item);
  EXPECT_EQ(dst, Expected(dst_box, box, item))
      << "src " << BoxString(src_box) << ", dst " << BoxString(dst_box)
      << ", box " << BoxString(box) << ", item " << item;
}

Box RandomBox(std::mt19937& rng, int rank) {
  std::uniform_int_distribution<int64_t> origin(-3, 6);
  std::uniform_int_distribution<int64_t> size(0, 5);
  std::uniform_int_distribution<int> zero(0, 9);
  Box b;
  for (int d = 0; d < rank; ++d) {
    b.origin.push_back(origin(rng));
    // About one dimension in ten is zero-sized.
    b.shape.push_back(zero(rng) == 0 ? 0 : size(rng));
  }
  return b;
}

// A random box inside `outer` (which must have no zero dimension).
Box RandomSubBox(std::mt19937& rng, const Box& outer) {
  Box b;
  for (size_t d = 0; d < outer.shape.size(); ++d) {
    std::uniform_int_distribution<int64_t> lo_d(0, outer.shape[d] - 1);
    const int64_t lo = lo_d(rng);
    std::uniform_int_distribution<int64_t> len_d(1, outer.shape[d] - lo);
    b.origin.push_back(outer.origin[d] + lo);
    b.shape.push_back(len_d(rng));
  }
  return b;
}

TEST(IntersectTest, MatchesNaiveReferenceOnRandomBoxes) {
  std::mt19937 rng(12345);
  int nonempty = 0, empty = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    const int rank = iter % 5;
    const Box a = RandomBox(rng, rank);
    const Box b = RandomBox(rng, rank);
    const RefIntersection ref = NaiveIntersect(a, b);
    Box out;
    const bool got = Intersect(a, b, &out);
    const std::string where =
        absl::StrCat("a ", BoxString(a), ", b ", BoxString(b));
    if (!ref.empty) {
      ++nonempty;
      ASSERT_TRUE(got) << where;
      EXPECT_EQ(out.origin, ref.box.origin) << where;
      EXPECT_EQ(out.shape, ref.box.shape) << where;
    } else {
      ++empty;
      if (BothZeroSomewhere(a, b)) {
        // Either answer is allowed, but a "common part" must hold nothing.
        if (got) {
          EXPECT_EQ(NumElements(out.shape), 0) << where;
        }
      } else {
        EXPECT_FALSE(got) << where;
      }
    }
    // Symmetric.
    Box out2;
    EXPECT_EQ(Intersect(b, a, &out2), got) << where;
    if (got) {
      EXPECT_EQ(out2.origin, out.origin) << where;
      EXPECT_EQ(out2.shape, out.shape) << where;
    }
  }
  // The generator covers both outcomes well.
  EXPECT_GT(nonempty, 4000);
  EXPECT_GT(empty, 4000);
}

TEST(IntersectTest, ScalarsAlwaysIntersect) {
  Box out{{7}, {7}};
  ASSERT_TRUE(Intersect(Box{}, Box{}, &out));
  EXPECT_TRUE(out.origin.empty());
  EXPECT_TRUE(out.shape.empty());
}

TEST(IntersectTest, TouchingEdgesAreEmpty) {
  Box out;
  EXPECT_FALSE(Intersect(Box{{0}, {4}}, Box{{4}, {4}}, &out));
  EXPECT_FALSE(Intersect(Box{{4}, {4}}, Box{{0}, {4}}, &out));
  // Touching along one dimension of two, overlapping along the other.
  EXPECT_FALSE(Intersect(Box{{0, 0}, {2, 3}}, Box{{1, 3}, {2, 3}}, &out));
  // Touching corners.
  EXPECT_FALSE(Intersect(Box{{0, 0}, {2, 2}}, Box{{2, 2}, {2, 2}}, &out));
  // Negative coordinates.
  EXPECT_FALSE(Intersect(Box{{-4}, {4}}, Box{{0}, {1}}, &out));
}

TEST(IntersectTest, OverlapOfOneElement) {
  Box out;
  ASSERT_TRUE(Intersect(Box{{0, 0}, {3, 3}}, Box{{2, -5}, {4, 8}}, &out));
  EXPECT_EQ(out.origin, (std::vector<int64_t>{2, 0}));
  EXPECT_EQ(out.shape, (Shape{1, 3}));
  ASSERT_TRUE(Intersect(Box{{0, 0}, {3, 3}}, Box{{2, 2}, {9, 9}}, &out));
  EXPECT_EQ(out.origin, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(out.shape, (Shape{1, 1}));
}

TEST(IntersectTest, ContainmentGivesTheInnerBox) {
  const Box outer{{-2, 0, 1}, {10, 4, 6}};
  const Box inner{{0, 1, 3}, {2, 2, 2}};
  Box out;
  ASSERT_TRUE(Intersect(outer, inner, &out));
  EXPECT_EQ(out.origin, inner.origin);
  EXPECT_EQ(out.shape, inner.shape);
  ASSERT_TRUE(Intersect(outer, outer, &out));
  EXPECT_EQ(out.origin, outer.origin);
  EXPECT_EQ(out.shape, outer.shape);
}

TEST(IntersectTest, ZeroSizedDimensionIsEmpty) {
  Box out;
  // A zero-sized box inside a non-empty one.
  EXPECT_FALSE(Intersect(Box{{0, 0}, {4, 4}}, Box{{1, 1}, {0, 2}}, &out));
  EXPECT_FALSE(Intersect(Box{{1, 1}, {2, 0}}, Box{{0, 0}, {4, 4}}, &out));
  // Zero-sized along different dimensions.
  EXPECT_FALSE(Intersect(Box{{0, 0}, {0, 4}}, Box{{0, 0}, {4, 0}}, &out));
  // Both zero-sized along the same dimension: either answer, nothing to
  // copy.
  if (Intersect(Box{{0, 0}, {0, 4}}, Box{{0, 0}, {0, 4}}, &out)) {
    EXPECT_EQ(NumElements(out.shape), 0);
  }
}

TEST(CopyBoxTest, MatchesNaiveReferenceOnRandomBoxes) {
  std::mt19937 rng(777);
  const size_t kItems[] = {1, 2, 4, 8};
  int copies = 0;
  for (int iter = 0; iter < 6000; ++iter) {
    const int rank = iter % 5;
    const Box src_box = RandomBox(rng, rank);
    const Box dst_box = RandomBox(rng, rank);
    const size_t item = kItems[(iter / 5) % 4];
    Box common;
    if (!Intersect(src_box, dst_box, &common)) continue;
    if (NumElements(common.shape) == 0) continue;
    ++copies;
    // The whole common part, and a random part of it.
    CheckCopy(src_box, dst_box, common, item);
    CheckCopy(src_box, dst_box, RandomSubBox(rng, common), item);
    if (HasFailure()) return;
  }
  EXPECT_GT(copies, 1000);
}

TEST(CopyBoxTest, WholeBoxToItself) {
  const Box b{{3, -1, 0}, {2, 3, 4}};
  for (size_t item : {1, 4, 8}) CheckCopy(b, b, b, item);
}

TEST(CopyBoxTest, SubBoxIntoExactlyThatBox) {
  // As ReadLocalBox does: the destination is the copied box itself.
  const Box src{{0, 0, 0, 0}, {3, 4, 2, 5}};
  const Box box{{1, 1, 0, 2}, {2, 2, 2, 3}};
  CheckCopy(src, box, box, 4);
  // And the reverse: from a dense box into a larger block.
  CheckCopy(box, src, box, 4);
}

TEST(CopyBoxTest, SingleElementAndSingleRow) {
  const Box src{{0, 0}, {4, 5}};
  const Box dst{{2, 1}, {3, 6}};
  CheckCopy(src, dst, Box{{3, 4}, {1, 1}}, 8);
  CheckCopy(src, dst, Box{{2, 1}, {1, 4}}, 2);
  CheckCopy(src, dst, Box{{2, 2}, {2, 1}}, 1);
}

TEST(CopyBoxTest, ScalarCopiesOneItem) {
  for (size_t item : {1, 2, 4, 8}) {
    const uint8_t src[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    uint8_t dst[9];
    std::fill(std::begin(dst), std::end(dst), kFill);
    CopyBox(src, Box{}, dst, Box{}, Box{}, item);
    for (size_t j = 0; j < item; ++j) EXPECT_EQ(dst[j], src[j]) << item;
    for (size_t j = item; j < 9; ++j) EXPECT_EQ(dst[j], kFill) << item;
  }
}

TEST(CopyBoxTest, ZeroSizedBoxCopiesNothing) {
  const Box src{{0, 0}, {3, 3}};
  const std::vector<uint8_t> data = SourceData(src, 4);
  std::vector<uint8_t> dst(9 * 4, kFill);
  CopyBox(data.data(), src, dst.data(), src, Box{{1, 1}, {0, 2}}, 4);
  CopyBox(data.data(), src, dst.data(), src, Box{{1, 1}, {2, 0}}, 4);
  EXPECT_EQ(dst, std::vector<uint8_t>(9 * 4, kFill));
}

}  // namespace
}  // namespace shardmap
