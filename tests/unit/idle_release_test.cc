#include "core/idle_release.h"

#include <gtest/gtest.h>
#include <malloc.h>

#include <cstring>
#include <memory>

#include "core/buffer_cache.h"
#include "core/tensor.h"

namespace shardmap {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

// IdleReleasePolicy, fed made-up readings: a tick every 250 ms of a 1 s
// quiet period, as in the servers.
class IdleReleasePolicyTest : public ::testing::Test {
 protected:
  static constexpr absl::Duration kPeriod = absl::Seconds(1);
  static constexpr absl::Duration kTick = absl::Milliseconds(250);

  // The next tick's reading: `allocations` more arrays, `cpu` more CPU.
  IdleSample Next(uint64_t allocations = 0,
                  absl::Duration cpu = absl::ZeroDuration()) {
    sample_.time += kTick;
    sample_.activity += allocations;
    sample_.cpu += cpu;
    return sample_;
  }
  // One tick; counts the reads of the held memory it makes.
  bool Tick(IdleReleasePolicy& p, const IdleSample& s) {
    return p.Tick(s, [this] {
      ++reads_;
      return held_;
    });
  }
  // Ticks while the process stays idle until the policy releases; the
  // ticks that took (0 if none within 10).
  int TicksToRelease(IdleReleasePolicy& p) {
    for (int i = 1; i <= 10; ++i) {
      if (Tick(p, Next())) return i;
    }
    return 0;
  }
  // What the releaser does after releasing: 1 MiB left free, none cached.
  void Release(IdleReleasePolicy& p) {
    held_ = {kMiB, 0};
    p.Released(held_);
  }

  IdleSample sample_{absl::UnixEpoch(), 0, absl::ZeroDuration()};
  HeldMemory held_{64 * kMiB, 0};
  int reads_ = 0;
};

TEST_F(IdleReleasePolicyTest, ReleasesOnceAfterAQuietPeriod) {
  IdleReleasePolicy p(kPeriod, sample_);
  // Quiet since the start: the 4th tick completes the quiet period.
  EXPECT_EQ(TicksToRelease(p), 4);
  Release(p);
  EXPECT_EQ(TicksToRelease(p), 0) << "an idle process is released once";
}

TEST_F(IdleReleasePolicyTest, ArrayAllocationsKeepItBusy) {
  IdleReleasePolicy p(kPeriod, sample_);
  for (int i = 0; i < 20; ++i) EXPECT_FALSE(Tick(p, Next(/*allocations=*/1)));
  EXPECT_EQ(reads_, 0) << "a busy process must not pay for mallinfo2";
  EXPECT_EQ(TicksToRelease(p), 4);
}

TEST_F(IdleReleasePolicyTest, CpuUseKeepsItBusyWithoutArrays) {
  // gRPC moving a large message allocates no array for a while, but uses
  // CPU: 2.5% of the tick is over the 2% share.
  IdleReleasePolicy p(kPeriod, sample_);
  for (int i = 0; i < 20; ++i) {
    EXPECT_FALSE(Tick(p, Next(0, kTick * 0.025)));
  }
  EXPECT_EQ(reads_, 0);
  // Heartbeats and keepalive pings (1% of the time) are quiet.
  int ticks = 0;
  while (!Tick(p, Next(0, kTick * 0.01)) && ticks < 10) ++ticks;
  EXPECT_EQ(ticks + 1, 4);
}

TEST_F(IdleReleasePolicyTest, WorkAfterAReleaseStartsANewQuietPeriod) {
  IdleReleasePolicy p(kPeriod, sample_);
  ASSERT_EQ(TicksToRelease(p), 4);
  Release(p);
  EXPECT_FALSE(Tick(p, Next(1)));
  EXPECT_EQ(TicksToRelease(p), 4) << "the next burst is released too";
}

TEST_F(IdleReleasePolicyTest, ReleasesAgainWhatIsFreedAfterARelease) {
  IdleReleasePolicy p(kPeriod, sample_);
  ASSERT_EQ(TicksToRelease(p), 4);
  Release(p);
  ASSERT_EQ(TicksToRelease(p), 0);
  // A call's buffers freed without any work to speak of: 3 MiB is within
  // kRegrowBytes, 6 MiB is not.
  held_.allocator_free = 4 * kMiB;
  EXPECT_EQ(TicksToRelease(p), 0);
  held_.allocator_free = 7 * kMiB;
  EXPECT_EQ(TicksToRelease(p), 1);
  Release(p);
  // An array freed into BufferCache, however small.
  held_.cached = 2 * kMiB;
  EXPECT_EQ(TicksToRelease(p), 1);
}

// The real thread, which is process-wide and starts once: each test counts
// the releases it causes from the count it finds, and waits for them by
// bounded polls.
constexpr absl::Duration kQuiet = absl::Milliseconds(500);

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

// The real thread releases a quiet process's cache without being prompted.
// When it does not release (busy, or released already) is the policy's,
// tested above with made-up readings: the real thread's timing depends on
// how loaded the machine is, so nothing here asserts a non-release.
TEST(IdleReleaseTest, ReleasesAQuietProcessUnprompted) {
  StartIdleMemoryRelease(kQuiet);
  BufferCache& cache = BufferCache::Global();
  const int64_t before = IdleMemoryReleases();
  { Tensor keep(DType::kFloat32, {1 << 20}); }  // 4 MiB, back to the cache
  // The releaser empties the cache, trims, then counts the release: both
  // are awaited (the cache alone is empty a moment before the count).
  EXPECT_TRUE(Eventually(
      [&] {
        return cache.cached_bytes() == 0 && IdleMemoryReleases() > before;
      },
      absl::Seconds(30)))
      << "a quiet process kept " << cache.cached_bytes()
      << " cached bytes, after " << IdleMemoryReleases() - before
      << " releases";
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

  // glibc serves 16 MiB from mmap (and gives it back on free) unless earlier
  // frees in this process raised its thresholds; what is tested is memory
  // that stays in the heap once freed, so put it there whatever ran before.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  auto heap = std::make_unique<char[]>(size_t{16} << 20);
  std::memset(heap.get(), 1, size_t{16} << 20);
  absl::SleepFor(4 * quiet);  // paces: lets the allocation's work settle
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
