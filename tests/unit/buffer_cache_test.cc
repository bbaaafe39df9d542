#include "core/buffer_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace shardmap {
namespace {

constexpr size_t kMiB = 1 << 20;

TEST(BufferCacheTest, AFreedBufferServesTheNextAllocationOfItsSize) {
  BufferCache cache(8 * kMiB);
  uint8_t* a = cache.Allocate(2 * kMiB);
  std::memset(a, 7, 2 * kMiB);  // the whole buffer is writable
  cache.Free(a, 2 * kMiB);
  EXPECT_EQ(cache.cached_bytes(), 2 * kMiB);
  uint8_t* b = cache.Allocate(2 * kMiB);
  EXPECT_EQ(b, a);
  EXPECT_EQ(cache.cached_bytes(), 0u);
  cache.Free(b, 2 * kMiB);
}

TEST(BufferCacheTest, AnAllocationOfAnotherSizeReleasesCachedBuffers) {
  BufferCache cache(64 * kMiB);
  uint8_t* a = cache.Allocate(2 * kMiB);
  uint8_t* b = cache.Allocate(2 * kMiB + 1);
  uint8_t* c = cache.Allocate(4 * kMiB);
  cache.Free(a, 2 * kMiB);
  cache.Free(b, 2 * kMiB + 1);
  cache.Free(c, 4 * kMiB);
  // 3 MiB is no cached size: the oldest buffers, 3 MiB or more of them, go.
  uint8_t* d = cache.Allocate(3 * kMiB);
  EXPECT_EQ(cache.cached_bytes(), 4 * kMiB);
  EXPECT_EQ(cache.Allocate(4 * kMiB), c);
  cache.Free(c, 4 * kMiB);
  cache.Free(d, 3 * kMiB);
}

// Whatever the order of allocations and frees, the bytes in use plus the
// bytes cached never pass the most that was ever in use at once.
TEST(BufferCacheTest, TheCacheNeverGrowsPastThePeak) {
  BufferCache cache(1 << 30);
  std::mt19937 rng(7);
  std::vector<std::pair<uint8_t*, size_t>> live;
  size_t in_use = 0, peak = 0;
  for (int step = 0; step < 2000; ++step) {
    if (live.empty() || rng() % 2 == 0) {
      const size_t bytes = kMiB * (1 + rng() % 6) + rng() % 3;
      live.emplace_back(cache.Allocate(bytes), bytes);
      in_use += bytes;
      peak = std::max(peak, in_use);
    } else {
      const size_t i = rng() % live.size();
      cache.Free(live[i].first, live[i].second);
      in_use -= live[i].second;
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
    }
    ASSERT_LE(in_use + cache.cached_bytes(), peak) << "step " << step;
  }
  for (auto& [p, bytes] : live) cache.Free(p, bytes);
}

TEST(BufferCacheTest, BuffersAreAligned) {
  BufferCache cache;
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{100}, kMiB + 3}) {
    uint8_t* p = cache.Allocate(bytes);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % BufferCache::kAlignment, 0u)
        << bytes;
    cache.Free(p, bytes);
  }
}

TEST(BufferCacheTest, SmallBuffersAreNotKept) {
  BufferCache cache;
  cache.Free(cache.Allocate(kMiB - 1), kMiB - 1);
  EXPECT_EQ(cache.cached_bytes(), 0u);
}

TEST(BufferCacheTest, TheOldestGoFirstOverCapacity) {
  BufferCache cache(5 * kMiB);
  uint8_t* huge = cache.Allocate(6 * kMiB);
  uint8_t* first = cache.Allocate(2 * kMiB);
  uint8_t* second = cache.Allocate(2 * kMiB + 1);
  uint8_t* third = cache.Allocate(2 * kMiB + 2);
  cache.Free(first, 2 * kMiB);
  cache.Free(second, 2 * kMiB + 1);
  cache.Free(third, 2 * kMiB + 2);  // 6 MiB + 3 > 5 MiB: `first` goes
  EXPECT_EQ(cache.cached_bytes(), 4 * kMiB + 3);
  EXPECT_EQ(cache.Allocate(2 * kMiB + 1), second);
  EXPECT_EQ(cache.Allocate(2 * kMiB + 2), third);
  cache.Free(second, 2 * kMiB + 1);
  cache.Free(third, 2 * kMiB + 2);
  // A buffer larger than the whole capacity is never kept.
  cache.Free(huge, 6 * kMiB);
  EXPECT_EQ(cache.cached_bytes(), 4 * kMiB + 3);
  cache.Clear();
  EXPECT_EQ(cache.cached_bytes(), 0u);
}

TEST(BufferCacheTest, TensorsReuseFreedBuffersAndZeroFillStillHolds) {
  const Shape shape = {512, 1024};  // 2 MiB of float32
  const uint8_t* old_data;
  {
    Tensor t(DType::kFloat32, shape);
    std::memset(t.data(), 0xff, t.num_bytes());
    old_data = t.data();
  }
  Tensor u(DType::kFloat32, shape);
  EXPECT_EQ(u.data(), old_data);
  for (int64_t i = 0; i < u.num_elements(); ++i) {
    ASSERT_EQ(u.data_as<float>()[i], 0.0f) << i;
  }
}

}  // namespace
}  // namespace shardmap
