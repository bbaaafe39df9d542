#include "server/job_admission.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "tests/unit/status_matchers.h"
#include "tests/unit/wait_until.h"

namespace shardmap {
namespace {

// Records which jobs started, in order, and which were turned away.
class Started {
 public:
  std::function<void()> Job(int id) {
    return [this, id] {
      absl::MutexLock lock(&mu_);
      order_.push_back(id);
    };
  }
  std::function<void(absl::Status)> Refused(int id) {
    return [this, id](absl::Status why) {
      absl::MutexLock lock(&mu_);
      refused_.emplace_back(id, std::move(why));
    };
  }
  std::vector<int> order() {
    absl::MutexLock lock(&mu_);
    return order_;
  }
  std::vector<std::pair<int, absl::Status>> refused() {
    absl::MutexLock lock(&mu_);
    return refused_;
  }

 private:
  absl::Mutex mu_;
  std::vector<int> order_;
  std::vector<std::pair<int, absl::Status>> refused_;
};

// Submits job `id`, recording its start or refusal in `started`.
absl::StatusOr<uint64_t> Submit(JobAdmission& admission, Started& started,
                                int id) {
  return admission.Submit(started.Job(id), started.Refused(id));
}

TEST(JobAdmissionTest, RunsUpToTheLimitAndTheRestInTheOrderTheyCame) {
  JobAdmission admission({/*max_running=*/2, /*max_queued=*/8});
  Started started;
  for (int id = 0; id < 5; ++id) {
    ASSERT_TRUE(Submit(admission, started, id).ok());
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
  ASSERT_TRUE(Submit(admission, started, 0).ok());
  ASSERT_TRUE(Submit(admission, started, 1).ok());
  EXPECT_TRUE(StatusIs(Submit(admission, started, 2).status(),
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
  ASSERT_TRUE(Submit(admission, started, 0).ok());
  EXPECT_EQ(Submit(admission, started, 1).status().code(),
            absl::StatusCode::kResourceExhausted);
  admission.Done();
  ASSERT_TRUE(Submit(admission, started, 2).ok());  // the slot is free
  EXPECT_EQ(started.order(), (std::vector<int>{0, 2}));
}

TEST(JobAdmissionTest, WithoutALimitEverythingStarts) {
  JobAdmission admission({/*max_running=*/0, /*max_queued=*/0});
  Started started;
  for (int id = 0; id < 100; ++id) {
    ASSERT_TRUE(Submit(admission, started, id).ok());
  }
  EXPECT_EQ(started.order().size(), 100u);
  EXPECT_EQ(admission.running(), 100);
  EXPECT_EQ(admission.queued(), 0);
}

TEST(JobAdmissionTest, AWithdrawnJobNeverStartsAndFreesItsPlace) {
  JobAdmission admission({/*max_running=*/1, /*max_queued=*/2});
  Started started;
  const uint64_t first = *Submit(admission, started, 0);
  const uint64_t second = *Submit(admission, started, 1);
  ASSERT_TRUE(Submit(admission, started, 2).ok());
  EXPECT_FALSE(admission.Withdraw(first));  // it runs: too late
  EXPECT_TRUE(admission.Withdraw(second));
  EXPECT_FALSE(admission.Withdraw(second));  // once
  EXPECT_EQ(admission.queued(), 1);
  ASSERT_TRUE(Submit(admission, started, 3).ok());  // its place was free
  admission.Done();
  admission.Done();
  EXPECT_EQ(started.order(), (std::vector<int>{0, 2, 3}));
}

TEST(JobAdmissionTest, ClosingTurnsTheWaitingAwayAndRefusesWhoWouldWait) {
  JobAdmission admission({/*max_running=*/1, /*max_queued=*/8});
  Started started;
  ASSERT_TRUE(Submit(admission, started, 0).ok());
  ASSERT_TRUE(Submit(admission, started, 1).ok());
  const uint64_t second = *Submit(admission, started, 2);
  admission.Close(absl::UnavailableError("shutting down"));
  const auto refused = started.refused();
  ASSERT_EQ(refused.size(), 2u);
  EXPECT_EQ(refused[0].first, 1);
  EXPECT_EQ(refused[1].first, 2);
  EXPECT_TRUE(StatusIs(refused[1].second, absl::StatusCode::kUnavailable,
                       {"shutting down"}));
  EXPECT_FALSE(admission.Withdraw(second));  // turned away already
  EXPECT_EQ(admission.queued(), 0);
  // No slot free: refused at once, neither function runs.
  EXPECT_TRUE(StatusIs(Submit(admission, started, 3).status(),
                       absl::StatusCode::kUnavailable, {"shutting down"}));
  // The running job goes on; once it ends, a job that finds the slot free
  // still runs.
  admission.Done();
  ASSERT_TRUE(Submit(admission, started, 4).ok());
  EXPECT_EQ(started.order(), (std::vector<int>{0, 4}));
  EXPECT_EQ(started.refused().size(), 2u);
}

// What a gauge would show: the counts after every change, in order.
TEST(JobAdmissionTest, TellsEveryChangeOfTheCountsInOrder) {
  std::vector<std::pair<int, int>> seen;  // under the admission's lock
  JobAdmission::Options options;
  options.max_running = 1;
  options.max_queued = 4;
  options.on_change = [&seen](int running, int waiting) {
    seen.emplace_back(running, waiting);
  };
  JobAdmission admission(options);
  Started started;
  ASSERT_TRUE(Submit(admission, started, 0).ok());
  ASSERT_TRUE(Submit(admission, started, 1).ok());
  const uint64_t third = *Submit(admission, started, 2);
  ASSERT_TRUE(admission.Withdraw(third));
  admission.Done();  // 1 takes the slot
  admission.Done();
  EXPECT_EQ(seen, (std::vector<std::pair<int, int>>{
                      {1, 0}, {1, 1}, {1, 2}, {1, 1}, {1, 0}, {0, 0}}));
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
        auto ticket = admission.Submit(
            [&] {
              const int now = ++running;
              if (now > kLimit) over_limit = true;
              int p = peak.load();
              while (now > p && !peak.compare_exchange_weak(p, now)) {
              }
              ++starts;
              began = true;
            },
            [](absl::Status) { ADD_FAILURE() << "never closed"; });
        ASSERT_TRUE(ticket.ok());
        if ((t + j) % 5 == 0 && admission.Withdraw(*ticket)) {
          ++withdrawn;
          continue;
        }
        // Started now, or by another submitter's Done.
        ASSERT_TRUE(WaitUntil([&] { return began.load(); }));
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
