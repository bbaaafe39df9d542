#include "core/buffer_cache.h"

#include <gtest/gtest.h>

#include <cstring>

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
  EXPECT_NE(cache.Allocate(3 * kMiB), a) << "sizes must match exactly";
  uint8_t* b = cache.Allocate(2 * kMiB);
  EXPECT_EQ(b, a);
  EXPECT_EQ(cache.cached_bytes(), 0u);
  cache.Free(b, 2 * kMiB);
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
  cache.Free(cache.Allocate(6 * kMiB), 6 * kMiB);
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
