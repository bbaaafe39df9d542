// Tests of server/deadline_watchdog: a watch fires once its deadline has
// passed (never before), a watch ended first never fires, a watch due
// before the loop's next wake-up wakes it (the loop is given an hour
// between looks, so nothing else would fire it within the wait), and one
// due after is found then. Outcomes are awaited with bounded waits; no
// sleep decides them.
#include "server/deadline_watchdog.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>

#include "absl/synchronization/mutex.h"
#include "tests/unit/wait_until.h"

namespace shardmap {
namespace {

// When a watch fired (InfinitePast: not yet).
class Fired {
 public:
  std::function<void()> Callback() {
    return [this] {
      absl::MutexLock lock(&mu_);
      at_ = absl::Now();
    };
  }
  absl::Time at() {
    absl::MutexLock lock(&mu_);
    return at_;
  }
  bool fired() { return at() != absl::InfinitePast(); }

 private:
  absl::Mutex mu_;
  absl::Time at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

TEST(DeadlineWatchdogTest, AWatchFiresOnceItsDeadlinePassed) {
  DeadlineWatchdog watchdog;
  Fired fired;
  const absl::Time deadline = absl::Now() + absl::Milliseconds(20);
  auto watch = watchdog.Start(deadline, fired.Callback());
  ASSERT_TRUE(WaitUntil([&] { return fired.fired(); }));
  EXPECT_GE(fired.at(), deadline);
}

TEST(DeadlineWatchdogTest, AWatchEndedFirstNeverFires) {
  DeadlineWatchdog watchdog;
  Fired ended;
  Fired later;
  const absl::Time now = absl::Now();
  watchdog.Start(now + absl::Milliseconds(200), ended.Callback()).reset();
  auto watch = watchdog.Start(now + absl::Milliseconds(250), later.Callback());
  // The loop saw the later deadline pass, so it saw the earlier one too.
  ASSERT_TRUE(WaitUntil([&] { return later.fired(); }));
  EXPECT_FALSE(ended.fired());
}

// The loop here sleeps up to an hour between looks, so a watch fires
// within the test's bound only if something wakes the loop for it.
TEST(DeadlineWatchdogTest, AWatchDueBeforeTheNextWakeUpWakesTheLoop) {
  DeadlineWatchdog watchdog(absl::Hours(1));
  Fired far;
  auto a = watchdog.Start(absl::Now() + absl::Hours(2), far.Callback());
  // Once a watch already due has fired, the loop has looked and gone back
  // to sleep for an hour (a Start waits for it to let go of its lock).
  Fired due_now;
  auto c = watchdog.Start(absl::Now(), due_now.Callback());
  ASSERT_TRUE(WaitUntil([&] { return due_now.fired(); }));
  // Due long before the loop would look again by itself.
  Fired soon;
  const absl::Time due = absl::Now() + absl::Milliseconds(10);
  auto b = watchdog.Start(due, soon.Callback());
  ASSERT_TRUE(WaitUntil([&] { return soon.fired(); }));
  EXPECT_GE(soon.at(), due);
  EXPECT_FALSE(far.fired());
}

TEST(DeadlineWatchdogTest, AWatchDueAfterTheNextWakeUpIsFoundThen) {
  DeadlineWatchdog watchdog(absl::Hours(1));
  Fired first;
  Fired second;
  const absl::Time now = absl::Now();
  auto a = watchdog.Start(now + absl::Milliseconds(30), first.Callback());
  // Later than the loop's next wake-up (the first deadline): it does not
  // wake the loop, which finds it when it wakes for the first.
  auto b = watchdog.Start(now + absl::Milliseconds(60), second.Callback());
  ASSERT_TRUE(WaitUntil([&] { return second.fired(); }));
  EXPECT_TRUE(first.fired());
  EXPECT_GE(first.at(), now + absl::Milliseconds(30));
  EXPECT_GE(second.at(), now + absl::Milliseconds(60));
}

}  // namespace
}  // namespace shardmap
