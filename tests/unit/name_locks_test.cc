// Tests of server/name_locks: shared reads, exclusive writes, a name both
// read and written counting as written, deadlines, wake-up on release, and
// no lost updates under contention.
#include "server/name_locks.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "tests/unit/status_matchers.h"

namespace shardmap {
namespace {

using Names = std::set<std::string>;

// How long an Acquire that must block is given before it times out.
constexpr absl::Duration kBlocked = absl::Milliseconds(50);
// A bound on waits that must succeed; never reached when all is well.
constexpr absl::Duration kLong = absl::Seconds(10);

class NameLocksTest : public ::testing::Test {
 protected:
  // Acquires what must be free at once (a deadline already passed still
  // succeeds when nothing is in the way).
  std::unique_ptr<NameLocks::Held> MustAcquire(Names reads, Names writes) {
    auto held =
        locks_.Acquire(std::move(reads), std::move(writes), absl::Now());
    EXPECT_TRUE(held.ok()) << held.status();
    return held.ok() ? *std::move(held) : nullptr;
  }
  // Expects the acquisition to time out, naming `busy`.
  void ExpectBlocked(Names reads, Names writes, const std::string& busy) {
    const absl::Time start = absl::Now();
    auto held =
        locks_.Acquire(std::move(reads), std::move(writes), start + kBlocked);
    EXPECT_TRUE(StatusIs(held.status(), absl::StatusCode::kDeadlineExceeded,
                         {"'" + busy + "'"}));
    EXPECT_GE(absl::Now() - start, kBlocked);
  }

  NameLocks locks_;
};

TEST_F(NameLocksTest, NothingHeldIsFree) {
  EXPECT_NE(MustAcquire({}, {}), nullptr);
  EXPECT_NE(MustAcquire({"a", "b"}, {"c"}), nullptr);
}

TEST_F(NameLocksTest, ReadersShare) {
  auto r1 = MustAcquire({"a"}, {});
  auto r2 = MustAcquire({"a", "b"}, {});
  auto r3 = MustAcquire({"a"}, {});
  EXPECT_NE(r3, nullptr);
}

TEST_F(NameLocksTest, WriterExcludesReadersAndWriters) {
  auto w = MustAcquire({}, {"a"});
  ExpectBlocked({"a"}, {}, "a");
  ExpectBlocked({}, {"a"}, "a");
  ExpectBlocked({"x", "a"}, {"y"}, "a");
  // Other names are free.
  EXPECT_NE(MustAcquire({"b"}, {"c"}), nullptr);
  w.reset();
  EXPECT_NE(MustAcquire({}, {"a"}), nullptr);
}

TEST_F(NameLocksTest, ReaderExcludesWriters) {
  auto r1 = MustAcquire({"a"}, {});
  auto r2 = MustAcquire({"a"}, {});
  ExpectBlocked({}, {"a"}, "a");
  r1.reset();
  // One reader is left.
  ExpectBlocked({}, {"a"}, "a");
  r2.reset();
  EXPECT_NE(MustAcquire({}, {"a"}), nullptr);
}

TEST_F(NameLocksTest, NameBothReadAndWrittenCountsAsWritten) {
  auto rw = MustAcquire({"a", "b"}, {"a"});
  ExpectBlocked({"a"}, {}, "a");
  // "b" is only read.
  EXPECT_NE(MustAcquire({"b"}, {}), nullptr);
  rw.reset();
  // Released completely: no reader count is left behind on "a".
  EXPECT_NE(MustAcquire({}, {"a"}), nullptr);
  EXPECT_NE(MustAcquire({}, {"a", "b"}), nullptr);
}

TEST_F(NameLocksTest, TimedOutAcquireTakesNothing) {
  auto w = MustAcquire({}, {"b"});
  ExpectBlocked({"a"}, {"b", "c"}, "b");
  // Neither "a" nor "c" was taken by the failed attempt.
  EXPECT_NE(MustAcquire({}, {"a", "c"}), nullptr);
}

TEST_F(NameLocksTest, ReleaseWakesWaiter) {
  auto w = MustAcquire({}, {"a"});
  absl::Notification started, acquired;
  absl::Status result = absl::UnknownError("not run");
  std::thread waiter([&] {
    started.Notify();
    auto held = locks_.Acquire({"a"}, {}, absl::Now() + kLong);
    result = held.status();
    acquired.Notify();
  });
  started.WaitForNotification();
  EXPECT_FALSE(acquired.WaitForNotificationWithTimeout(kBlocked));
  w.reset();
  EXPECT_TRUE(acquired.WaitForNotificationWithTimeout(kLong));
  waiter.join();
  EXPECT_TRUE(result.ok()) << result;
}

TEST_F(NameLocksTest, ReleaseOfLastReaderWakesWriter) {
  auto r1 = MustAcquire({"a"}, {});
  auto r2 = MustAcquire({"a"}, {});
  absl::Notification acquired;
  absl::Status result = absl::UnknownError("not run");
  std::thread waiter([&] {
    auto held = locks_.Acquire({}, {"a"}, absl::Now() + kLong);
    result = held.status();
    acquired.Notify();
  });
  r1.reset();
  EXPECT_FALSE(acquired.WaitForNotificationWithTimeout(kBlocked));
  r2.reset();
  EXPECT_TRUE(acquired.WaitForNotificationWithTimeout(kLong));
  waiter.join();
  EXPECT_TRUE(result.ok()) << result;
}

TEST_F(NameLocksTest, WritersLoseNoUpdates) {
  constexpr int kThreads = 8;
  constexpr int kIncrements = 300;
  int counter = 0;  // guarded by the write lock on "counter" only
  std::atomic<int> failures{0};
  std::atomic<int> torn_reads{0};
  absl::Notification start;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      start.WaitForNotification();
      for (int i = 0; i < kIncrements; ++i) {
        // Every other thread also takes a read lock on a shared name, so
        // readers and writers mix.
        Names reads = t % 2 ? Names{"shared"} : Names{};
        auto held = locks_.Acquire(reads, {"counter"}, absl::Now() + kLong);
        if (!held.ok()) {
          ++failures;
          continue;
        }
        const int v = counter;
        std::this_thread::yield();
        counter = v + 1;
      }
    });
  }
  // Readers of "counter" see it unchanged while they hold it.
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&] {
      start.WaitForNotification();
      for (int i = 0; i < 200; ++i) {
        auto held = locks_.Acquire({"counter"}, {}, absl::Now() + kLong);
        if (!held.ok()) {
          ++failures;
          continue;
        }
        const int v = counter;
        std::this_thread::yield();
        if (counter != v) ++torn_reads;
      }
    });
  }
  start.Notify();
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(torn_reads.load(), 0);
  EXPECT_EQ(counter, kThreads * kIncrements);
}

}  // namespace
}  // namespace shardmap
