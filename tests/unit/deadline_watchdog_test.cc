// Tests of server/deadline_watchdog: a watch fires once its deadline has
// passed (never before), a watch ended first never fires, and watches due
// before and after the loop's next wake-up (only the first wakes it) both
// fire. Outcomes are awaited with bounded waits; no sleep decides them.
// How promptly a watch fires is not checked: the loop looks at least once
// a second whatever the deadlines, and a busy machine decides the rest.
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

TEST(DeadlineWatchdogTest, WatchesBeforeAndAfterTheNextWakeUpBothFire) {
  DeadlineWatchdog watchdog;
  Fired first;
  Fired second;
  const absl::Time now = absl::Now();
  auto a = watchdog.Start(now + absl::Milliseconds(30), first.Callback());
  // Later than the loop's next wake-up (the first deadline): it is not
  // woken for it, and finds it when it wakes for the first.
  auto b = watchdog.Start(now + absl::Milliseconds(60), second.Callback());
  // And one much earlier than anything the loop waits for wakes it.
  Fired early;
  auto c = watchdog.Start(now, early.Callback());
  ASSERT_TRUE(WaitUntil([&] { return second.fired(); }));
  EXPECT_TRUE(first.fired());
  EXPECT_TRUE(early.fired());
  EXPECT_GE(first.at(), now + absl::Milliseconds(30));
  EXPECT_GE(second.at(), now + absl::Milliseconds(60));
}

}  // namespace
}  // namespace shardmap
