#include "core/idle_release.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>

#include "core/buffer_cache.h"
#include "core/tensor.h"

namespace shardmap {
namespace {

// Polls `done` for up to `limit`.
template <typename F>
bool Eventually(F done, absl::Duration limit) {
  const absl::Time end = absl::Now() + limit;
  while (!done()) {
    if (absl::Now() > end) return false;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return true;
}

// A tensor every 20 ms is busy: a quiet period 25 times as long leaves a
// loaded machine's scheduler room before a pause looks like quiet.
constexpr absl::Duration kQuiet = absl::Milliseconds(500);

// The releaser is process-wide and starts once: each test counts the
// releases it causes from the count it finds.
TEST(IdleReleaseTest, ReleasesOnceQuietAndNeverWhileBusy) {
  const absl::Duration quiet = kQuiet;
  StartIdleMemoryRelease(quiet);
  BufferCache& cache = BufferCache::Global();

  // Busy: a tensor every 20 ms for 5 quiet periods keeps the cache.
  const int64_t before = IdleMemoryReleases();
  { Tensor keep(DType::kFloat32, {1 << 20}); }  // 4 MiB, back to the cache
  ASSERT_GE(cache.cached_bytes(), size_t{4} << 20);
  const absl::Time busy_end = absl::Now() + 5 * quiet;
  while (absl::Now() < busy_end) {
    Tensor small(DType::kInt32, {16});
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_GE(cache.cached_bytes(), size_t{4} << 20)
      << "the cache was emptied while tensors were still being allocated";
  const int64_t while_busy = IdleMemoryReleases() - before;
  // At most one release may have begun before the first tensor above.
  EXPECT_LE(while_busy, 1);

  // Quiet: released within a few quiet periods, and only once.
  EXPECT_TRUE(
      Eventually([&] { return cache.cached_bytes() == 0; }, absl::Seconds(30)));
  const int64_t after_quiet = IdleMemoryReleases();
  EXPECT_GT(after_quiet, before + while_busy);
  absl::SleepFor(4 * quiet);
  EXPECT_EQ(IdleMemoryReleases(), after_quiet)
      << "a quiet process is released once, not on every tick";
}

// Memory freed after a release, with no allocation since, is released
// too: an array that outlived the job's last allocation (it lands in
// BufferCache), and heap memory freed outside Tensor (gRPC's buffers).
TEST(IdleReleaseTest, ReleasesWhatIsFreedAfterTheRelease) {
  const absl::Duration quiet = kQuiet;
  StartIdleMemoryRelease(quiet);
  BufferCache& cache = BufferCache::Global();
  auto late = std::make_unique<Tensor>(DType::kFloat32, Shape{1 << 20});
  const int64_t before = IdleMemoryReleases();
  ASSERT_TRUE(Eventually([&] { return IdleMemoryReleases() > before; },
                         absl::Seconds(30)));
  const int64_t released = IdleMemoryReleases();
  late.reset();  // 4 MiB back to the cache, no allocation noted
  // The releaser may empty the cache at once: what is checked is that a
  // release follows the free and leaves the cache empty.
  EXPECT_TRUE(Eventually(
      [&] {
        return IdleMemoryReleases() > released && cache.cached_bytes() == 0;
      },
      absl::Seconds(30)))
      << "a buffer freed after the release stayed cached";

  auto heap = std::make_unique<char[]>(size_t{16} << 20);
  std::memset(heap.get(), 1, size_t{16} << 20);
  absl::SleepFor(4 * quiet);  // paces: lets the allocation's churn settle
  // Counted just before the free, so a release the allocation itself
  // caused is not taken for the one the free must cause.
  const int64_t settled = IdleMemoryReleases();
  heap.reset();
  EXPECT_TRUE(Eventually([&] { return IdleMemoryReleases() > settled; },
                         absl::Seconds(30)))
      << "16 MiB freed outside Tensor was not released";
  const int64_t after = IdleMemoryReleases();
  absl::SleepFor(4 * quiet);
  EXPECT_LE(IdleMemoryReleases(), after + 1)
      << "an idle process is not released on every tick";
}

}  // namespace
}  // namespace shardmap
