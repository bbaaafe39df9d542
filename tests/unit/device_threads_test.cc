// DeviceThreads: every task runs at once (a task never waits for another
// to end), threads are reused across tasks, and idle ones end.
#include "core/device_threads.h"

#include <gtest/gtest.h>

#include <atomic>

#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/notification.h"
#include "tests/unit/wait_until.h"

namespace shardmap {
namespace {

constexpr absl::Duration kBound = absl::Seconds(30);

TEST(DeviceThreadsTest, RunsEveryTaskAtOnce) {
  DeviceThreads threads;
  // Each task waits until all have started: they can finish only if all
  // run at the same time.
  constexpr int kTasks = 8;
  std::atomic<int> started{0};
  absl::BlockingCounter ended(kTasks);
  for (int i = 0; i < kTasks; ++i) {
    threads.Run([&] {
      ++started;
      WaitUntil([&] { return started.load() == kTasks; });
      ended.DecrementCount();
    });
  }
  ended.Wait();
  EXPECT_EQ(started.load(), kTasks);
  EXPECT_GE(threads.size(), kTasks);
}

TEST(DeviceThreadsTest, ReusesAnIdleThread) {
  DeviceThreads threads;
  for (int i = 0; i < 20; ++i) {
    absl::Notification done;
    threads.Run([&] { done.Notify(); });
    ASSERT_TRUE(done.WaitForNotificationWithTimeout(kBound));
    // The thread becomes idle again right after the task: wait for it.
    ASSERT_TRUE(WaitUntil([&] { return threads.idle() == 1; }));
  }
  EXPECT_EQ(threads.size(), 1);
}

TEST(DeviceThreadsTest, IdleThreadsEnd) {
  DeviceThreads threads(absl::Milliseconds(1));
  absl::Notification done;
  threads.Run([&] { done.Notify(); });
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(kBound));
  EXPECT_TRUE(WaitUntil([&] { return threads.size() == 0; }));
  // And a task after that still runs.
  absl::Notification again;
  threads.Run([&] { again.Notify(); });
  EXPECT_TRUE(again.WaitForNotificationWithTimeout(kBound));
}

}  // namespace
}  // namespace shardmap
