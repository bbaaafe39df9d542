// The benchmarks' reading of what a process cost (bench/bench_util.h),
// against the process's own CPU clock and against sleeps that must switch.
#include "bench/bench_util.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace shardmap_bench {
namespace {

double ProcessCpuUs() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

TEST(ProcessCostTest, CountsCpuTimeAsTheProcesssOwnClockDoes) {
  const ProcessCost before = ReadProcessCost(0);
  const double start = ProcessCpuUs();
  volatile uint64_t sink = 0;
  while (ProcessCpuUs() - start < 300e3) {
    for (uint64_t i = 0; i < 100000; ++i) sink = sink + i;
  }
  const double spent = ProcessCpuUs() - start;
  const ProcessCost after = ReadProcessCost(0);
  ASSERT_GE(before.cpu_us, 0);
  // /proc counts in clock ticks (10 ms at USER_HZ 100): a few of them off.
  EXPECT_NEAR(after.cpu_us - before.cpu_us, spent, 40e3);
}

TEST(ProcessCostTest, CountsTheSwitchesOfAThreadThatSleeps) {
  constexpr int kSleeps = 20;
  absl::Notification go, slept, read;
  std::thread sleeper([&] {
    go.WaitForNotification();
    for (int i = 0; i < kSleeps; ++i) absl::SleepFor(absl::Milliseconds(1));
    slept.Notify();
    // Alive until read: only live threads' switches are counted.
    read.WaitForNotification();
  });
  const ProcessCost before = ReadProcessCost(0);
  go.Notify();
  slept.WaitForNotification();
  const ProcessCost after = ReadProcessCost(0);
  read.Notify();
  sleeper.join();
  ASSERT_FALSE(before.switches.empty());
  // Every sleep gives up the CPU at least once.
  EXPECT_GE(SwitchesBetween(before, after), kSleeps);
}

TEST(ProcessCostTest, SwitchesBetweenCountsTheThreadsAliveAtTheEnd) {
  ProcessCost before, after;
  before.switches = {{1, 10}, {2, 50}};  // thread 2 ends meanwhile
  after.switches = {{1, 15}, {3, 7}};    // thread 3 starts meanwhile
  EXPECT_EQ(SwitchesBetween(before, after), 5 + 7);
}

TEST(ProcessCostTest, AProcessThatIsGoneHasNoCost) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  const ProcessCost cost = ReadProcessCost(child);
  EXPECT_EQ(cost.cpu_us, -1);
  EXPECT_TRUE(cost.switches.empty());
}

}  // namespace
}  // namespace shardmap_bench
