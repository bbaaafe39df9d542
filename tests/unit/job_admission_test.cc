#include "server/job_admission.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "tests/unit/status_matchers.h"

namespace shardmap {
namespace {

// Records which jobs started, in order.
class Started {
 public:
  std::function<void()> Job(int id) {
    return [this, id] {
      absl::MutexLock lock(&mu_);
      order_.push_back(id);
    };
  }
  std::vector<int> order() {
    absl::MutexLock lock(&mu_);
    return order_;
  }

 private:
  absl::Mutex mu_;
  std::vector<int> order_;
};

TEST(JobAdmissionTest, RunsUpToTheLimitAndTheRestInTheOrderTheyCame) {
  JobAdmission admission({/*max_running=*/2, /*max_queued=*/8});
  Started started;
  for (int id = 0; id < 5; ++id) {
    ASSERT_TRUE(admission.Submit(started.Job(id)).ok());
  }
  EXPECT_EQ(started.order(), (std::vector<int>{0, 1}));
  EXPECT_EQ(admission.running(), 2);
  EXPECT_EQ(admission.queued(), 3);

  admission.Done();  // a slot passes to the first in line
  EXPECT_EQ(started.order(), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(admission.running(), 2);
  admission.Done();
  admission.Done();
  EXPECT_EQ(started.order(), (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(admission.queued(), 0);
  admission.Done();
  EXPECT_EQ(admission.running(), 1);
  admission.Done();
  EXPECT_EQ(admission.running(), 0);
}

TEST(JobAdmissionTest, OneBeyondTheQueueIsRefusedNamingBothLimits) {
  JobAdmission admission({/*max_running=*/1, /*max_queued=*/1});
  Started started;
  ASSERT_TRUE(admission.Submit(started.Job(0)).ok());
  ASSERT_TRUE(admission.Submit(started.Job(1)).ok());
  EXPECT_TRUE(StatusIs(admission.Submit(started.Job(2)).status(),
                       absl::StatusCode::kResourceExhausted,
                       {"runs 1 jobs", "1 waiting", "--max-concurrent-jobs",
                        "--max-queued-jobs"}));
  admission.Done();
  admission.Done();
  EXPECT_EQ(started.order(), (std::vector<int>{0, 1}));  // never 2
}

TEST(JobAdmissionTest, WithoutAQueueOneTooManyIsRefusedAtOnce) {
  JobAdmission admission({/*max_running=*/1, /*max_queued=*/0});
  Started started;
  ASSERT_TRUE(admission.Submit(started.Job(0)).ok());
  EXPECT_EQ(admission.Submit(started.Job(1)).status().code(),
            absl::StatusCode::kResourceExhausted);
  admission.Done();
  ASSERT_TRUE(admission.Submit(started.Job(2)).ok());  // the slot is free
  EXPECT_EQ(started.order(), (std::vector<int>{0, 2}));
}

TEST(JobAdmissionTest, WithoutALimitEverythingStarts) {
  JobAdmission admission({/*max_running=*/0, /*max_queued=*/0});
  Started started;
  for (int id = 0; id < 100; ++id) {
    ASSERT_TRUE(admission.Submit(started.Job(id)).ok());
  }
  EXPECT_EQ(started.order().size(), 100u);
  EXPECT_EQ(admission.running(), 100);
  EXPECT_EQ(admission.queued(), 0);
}

TEST(JobAdmissionTest, AWithdrawnJobNeverStartsAndFreesItsPlace) {
  JobAdmission admission({/*max_running=*/1, /*max_queued=*/2});
  Started started;
  const uint64_t first = *admission.Submit(started.Job(0));
  const uint64_t second = *admission.Submit(started.Job(1));
  ASSERT_TRUE(admission.Submit(started.Job(2)).ok());
  EXPECT_FALSE(admission.Withdraw(first));  // it runs: too late
  EXPECT_TRUE(admission.Withdraw(second));
  EXPECT_FALSE(admission.Withdraw(second));  // once
  EXPECT_EQ(admission.queued(), 1);
  ASSERT_TRUE(admission.Submit(started.Job(3)).ok());  // its place was free
  admission.Done();
  admission.Done();
  EXPECT_EQ(started.order(), (std::vector<int>{0, 2, 3}));
}

// Many threads submit, run their job and end it, some withdrawing while
// they wait: every job starts at most once, exactly the ones not withdrawn
// start, and never more than the limit run at once.
TEST(JobAdmissionTest, ConcurrentSubmittersNeverRunMoreThanTheLimit) {
  constexpr int kLimit = 3;
  constexpr int kThreads = 8;
  constexpr int kJobsEach = 200;
  JobAdmission admission({kLimit, kThreads * kJobsEach});
  std::atomic<int> running{0}, peak{0}, starts{0}, withdrawn{0};
  std::atomic<bool> over_limit{false};
  // A started job ends on the thread that submitted it (as a pooled thread
  // would): each submitter waits for its job's start before ending it.
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int j = 0; j < kJobsEach; ++j) {
        std::atomic<bool> began{false};
        auto ticket = admission.Submit([&] {
          const int now = ++running;
          if (now > kLimit) over_limit = true;
          int p = peak.load();
          while (now > p && !peak.compare_exchange_weak(p, now)) {
          }
          ++starts;
          began = true;
        });
        ASSERT_TRUE(ticket.ok());
        if ((t + j) % 5 == 0 && admission.Withdraw(*ticket)) {
          ++withdrawn;
          continue;
        }
        // Started now, or by another submitter's Done.
        while (!began) std::this_thread::yield();
        --running;
        admission.Done();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_FALSE(over_limit);
  EXPECT_LE(peak.load(), kLimit);
  EXPECT_EQ(starts + withdrawn, kThreads * kJobsEach);
  EXPECT_EQ(admission.running(), 0);
  EXPECT_EQ(admission.queued(), 0);
}

}  // namespace
}  // namespace shardmap
