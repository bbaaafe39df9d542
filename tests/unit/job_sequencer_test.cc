// Tests of worker/job_sequencer: tickets run in order whatever order they
// arrive in, a missing ticket is waited for (never skipped by time) until
// the coordinator skips it, a skipped ticket is refused if it comes later,
// a new worker id restarts the order and retires the old one, and
// deadlines and cancellation end a wait.
#include "worker/job_sequencer.h"

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "tests/unit/status_matchers.h"

namespace shardmap {
namespace {

// How long a wait that must not end yet is watched.
constexpr absl::Duration kBlocked = absl::Milliseconds(50);
// A bound on waits that must end; never reached when all is well.
constexpr absl::Duration kLong = absl::Seconds(10);

bool NotCancelled() { return false; }

// One Enter on its own thread. `waiting` is notified once Enter polls
// `cancelled`, which it does only while the ticket waits its turn.
class Entrant {
 public:
  Entrant(JobSequencer* seq, std::string worker_id, uint64_t ticket,
          absl::Time deadline = absl::Now() + kLong)
      : thread_([this, seq, worker_id, ticket, deadline] {
          status_ = seq->Enter(worker_id, ticket, deadline, [this] {
            if (!waiting_.HasBeenNotified()) waiting_.Notify();
            return cancel_.load();
          });
          done_.Notify();
        }) {}
  ~Entrant() { thread_.join(); }

  bool WaitUntilWaiting() {
    return waiting_.WaitForNotificationWithTimeout(kLong);
  }
  bool Done(absl::Duration wait) {
    return done_.WaitForNotificationWithTimeout(wait);
  }
  void Cancel() { cancel_ = true; }
  // Only after Done().
  const absl::Status& status() const { return status_; }

 private:
  absl::Notification waiting_, done_;
  std::atomic<bool> cancel_{false};
  absl::Status status_ = absl::UnknownError("not done");
  std::thread thread_;
};

class JobSequencerTest : public ::testing::Test {
 protected:
  JobSequencerTest() { spdlog::set_level(spdlog::level::err); }

  absl::Status EnterNow(const std::string& id, uint64_t ticket,
                        absl::Duration timeout = kLong) {
    return seq_->Enter(id, ticket, absl::Now() + timeout, NotCancelled);
  }

  std::unique_ptr<JobSequencer> seq_ = std::make_unique<JobSequencer>();
};

TEST_F(JobSequencerTest, TicketsInOrderEnterAtOnce) {
  for (uint64_t t = 0; t < 5; ++t) {
    ASSERT_TRUE(EnterNow("w0", t, absl::ZeroDuration()).ok()) << t;
    seq_->Leave("w0", t);
  }
}

TEST_F(JobSequencerTest, OutOfOrderArrivalsRunInOrder) {
  constexpr int kTickets = 6;
  absl::Mutex mu;
  std::vector<uint64_t> order;
  std::vector<std::unique_ptr<std::thread>> threads;
  std::vector<std::unique_ptr<absl::Notification>> waiting;
  auto run = [&](uint64_t ticket, absl::Notification* w) {
    absl::Status s = seq_->Enter("w0", ticket, absl::Now() + kLong, [w] {
      if (w != nullptr && !w->HasBeenNotified()) w->Notify();
      return false;
    });
    EXPECT_TRUE(s.ok()) << ticket << ": " << s;
    {
      absl::MutexLock lock(&mu);
      order.push_back(ticket);
    }
    std::this_thread::yield();
    seq_->Leave("w0", ticket);
  };
  // Tickets 5, 4, 3, 2, 1 arrive first (each waiting before the next
  // comes), then 0.
  for (uint64_t t = kTickets - 1; t >= 1; --t) {
    waiting.push_back(std::make_unique<absl::Notification>());
    absl::Notification* w = waiting.back().get();
    threads.push_back(std::make_unique<std::thread>(run, t, w));
    ASSERT_TRUE(w->WaitForNotificationWithTimeout(kLong)) << t;
  }
  threads.push_back(std::make_unique<std::thread>(run, 0, nullptr));
  for (auto& th : threads) th->join();
  EXPECT_EQ(order, (std::vector<uint64_t>{0, 1, 2, 3, 4, 5}));
}

TEST_F(JobSequencerTest, ManyThreadsRunOneAtATimeInOrder) {
  constexpr int kTickets = 24;
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  absl::Mutex mu;
  std::vector<uint64_t> order;
  absl::Notification start;
  std::vector<std::thread> threads;
  // Started in a scrambled order.
  for (int i = 0; i < kTickets; ++i) {
    const uint64_t ticket = (i * 7) % kTickets;
    threads.emplace_back([&, ticket] {
      start.WaitForNotification();
      absl::Status s = EnterNow("w0", ticket);
      EXPECT_TRUE(s.ok()) << ticket << ": " << s;
      if (++inside > 1) ++overlaps;
      {
        absl::MutexLock lock(&mu);
        order.push_back(ticket);
      }
      std::this_thread::yield();
      --inside;
      seq_->Leave("w0", ticket);
    });
  }
  start.Notify();
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(overlaps.load(), 0);
  ASSERT_EQ(order.size(), static_cast<size_t>(kTickets));
  for (int i = 0; i < kTickets; ++i) EXPECT_EQ(order[i], i);
}

TEST_F(JobSequencerTest, LeaveLetsTheNextIn) {
  ASSERT_TRUE(EnterNow("w0", 0).ok());
  Entrant next(seq_.get(), "w0", 1);
  ASSERT_TRUE(next.WaitUntilWaiting());
  EXPECT_FALSE(next.Done(kBlocked));
  seq_->Leave("w0", 0);
  ASSERT_TRUE(next.Done(kLong));
  EXPECT_TRUE(next.status().ok()) << next.status();
  seq_->Leave("w0", 1);
  EXPECT_TRUE(EnterNow("w0", 2, absl::ZeroDuration()).ok());
}

TEST_F(JobSequencerTest, MissingTicketIsWaitedForUntilTheDeadline) {
  // Ticket 0 never comes and nobody skips it: ticket 1 waits for it to
  // the end of its own deadline, however long that is.
  EXPECT_TRUE(StatusIs(EnterNow("w0", 1, kBlocked),
                       absl::StatusCode::kDeadlineExceeded,
                       {"1 earlier job(s)"}));
  // Ticket 1 gave up and counts as done; ticket 0 still has its turn.
  ASSERT_TRUE(EnterNow("w0", 0, absl::ZeroDuration()).ok());
  seq_->Leave("w0", 0);
  EXPECT_TRUE(EnterNow("w0", 2, absl::ZeroDuration()).ok());
}

TEST_F(JobSequencerTest, SkipLetsTheWaitingTicketIn) {
  Entrant next(seq_.get(), "w0", 1);
  ASSERT_TRUE(next.WaitUntilWaiting());
  EXPECT_FALSE(next.Done(kBlocked));
  seq_->Skip("w0", 0);
  ASSERT_TRUE(next.Done(kLong));
  EXPECT_TRUE(next.status().ok()) << next.status();
  seq_->Leave("w0", 1);
}

TEST_F(JobSequencerTest, SkipsBeforeTheirTicketsLetLaterTicketsInAtOnce) {
  ASSERT_TRUE(EnterNow("w0", 0).ok());
  seq_->Leave("w0", 0);
  // Tickets 1 and 3 are skipped before anything else arrives; 2 runs.
  seq_->Skip("w0", 3);
  seq_->Skip("w0", 1);
  ASSERT_TRUE(EnterNow("w0", 2, absl::ZeroDuration()).ok());
  seq_->Leave("w0", 2);
  EXPECT_TRUE(EnterNow("w0", 4, absl::ZeroDuration()).ok());
  seq_->Leave("w0", 4);
}

TEST_F(JobSequencerTest, SkippedTicketThatArrivesAfterAllIsAborted) {
  seq_->Skip("w0", 1);
  // Not yet passed (ticket 0 has not run), but skipped: refused.
  EXPECT_TRUE(StatusIs(EnterNow("w0", 1, absl::ZeroDuration()),
                       absl::StatusCode::kAborted,
                       {"ticket 1", "after its turn had passed"}));
  ASSERT_TRUE(EnterNow("w0", 0, absl::ZeroDuration()).ok());
  seq_->Leave("w0", 0);
  // Passed by now: refused too, as is a ticket that already ran.
  EXPECT_TRUE(StatusIs(EnterNow("w0", 1, absl::ZeroDuration()),
                       absl::StatusCode::kAborted, {"ticket 1"}));
  EXPECT_TRUE(StatusIs(EnterNow("w0", 0, absl::ZeroDuration()),
                       absl::StatusCode::kAborted, {"ticket 0"}));
  EXPECT_TRUE(EnterNow("w0", 2, absl::ZeroDuration()).ok());
}

TEST_F(JobSequencerTest, SkipOfAWaitingTicketAbortsIt) {
  ASSERT_TRUE(EnterNow("w0", 0).ok());
  Entrant waiting(seq_.get(), "w0", 1);
  ASSERT_TRUE(waiting.WaitUntilWaiting());
  seq_->Skip("w0", 1);
  ASSERT_TRUE(waiting.Done(kLong));
  EXPECT_TRUE(StatusIs(waiting.status(), absl::StatusCode::kAborted,
                       {"gave up the job of ticket 1"}));
  seq_->Leave("w0", 0);
  EXPECT_TRUE(EnterNow("w0", 2, absl::ZeroDuration()).ok());
}

TEST_F(JobSequencerTest, SkipOfTheRunningTicketChangesNothing) {
  ASSERT_TRUE(EnterNow("w0", 0).ok());
  seq_->Skip("w0", 0);  // e.g. the coordinator failed the job meanwhile
  Entrant next(seq_.get(), "w0", 1);
  ASSERT_TRUE(next.WaitUntilWaiting());
  EXPECT_FALSE(next.Done(kBlocked));  // ticket 0 still runs
  seq_->Leave("w0", 0);
  ASSERT_TRUE(next.Done(kLong));
  EXPECT_TRUE(next.status().ok()) << next.status();
  seq_->Leave("w0", 1);
  // A skip of a ticket that ran is moot as well.
  seq_->Skip("w0", 1);
  EXPECT_TRUE(EnterNow("w0", 2, absl::ZeroDuration()).ok());
}

TEST_F(JobSequencerTest, SkipOfAnIdNotSeenYetIsKeptForIt) {
  ASSERT_TRUE(EnterNow("w0", 0).ok());
  seq_->Leave("w0", 0);
  // The worker registered again as w9; w9's ticket 0 failed before its
  // header came, and its skip arrives before any w9 job.
  seq_->Skip("w9", 0);
  ASSERT_TRUE(EnterNow("w9", 1, absl::ZeroDuration()).ok());
  seq_->Leave("w9", 1);
}

TEST_F(JobSequencerTest, LateJobsAndSkipsOfARetiredIdChangeNothing) {
  ASSERT_TRUE(EnterNow("w0", 0).ok());
  seq_->Leave("w0", 0);
  ASSERT_TRUE(EnterNow("w7", 0).ok());
  // w0 is retired: its late skip neither switches the order back nor
  // touches w7's tickets, and its late job is refused.
  seq_->Skip("w0", 1);
  seq_->Skip("w0", 0);
  EXPECT_TRUE(StatusIs(EnterNow("w0", 1, absl::ZeroDuration()),
                       absl::StatusCode::kAborted, {"registered again"}));
  seq_->Leave("w7", 0);
  ASSERT_TRUE(EnterNow("w7", 1, absl::ZeroDuration()).ok());
  seq_->Leave("w7", 1);
}

TEST_F(JobSequencerTest, NewWorkerIdRestartsFromZero) {
  for (uint64_t t = 0; t < 3; ++t) {
    ASSERT_TRUE(EnterNow("w0", t).ok());
    seq_->Leave("w0", t);
  }
  ASSERT_TRUE(EnterNow("w7", 0, absl::ZeroDuration()).ok());
  // A Leave of the old id changes nothing.
  seq_->Leave("w0", 0);
  EXPECT_TRUE(StatusIs(EnterNow("w7", 1, kBlocked),
                       absl::StatusCode::kDeadlineExceeded, {}));
  // Ticket 1 gave up waiting: it counts as done, so once ticket 0 leaves,
  // ticket 2 goes next, and ticket 1 cannot come back.
  seq_->Leave("w7", 0);
  EXPECT_TRUE(EnterNow("w7", 2, absl::ZeroDuration()).ok());
  seq_->Leave("w7", 2);
  EXPECT_TRUE(StatusIs(EnterNow("w7", 1, absl::ZeroDuration()),
                       absl::StatusCode::kAborted, {}));
}

TEST_F(JobSequencerTest, WaiterOfOlderWorkerIdIsAborted) {
  ASSERT_TRUE(EnterNow("w0", 0).ok());
  Entrant old(seq_.get(), "w0", 2);
  ASSERT_TRUE(old.WaitUntilWaiting());
  // The worker registered again: its order restarts, and the old id's
  // waiting job must not be run in the new order.
  ASSERT_TRUE(EnterNow("w5", 0, absl::ZeroDuration()).ok());
  ASSERT_TRUE(old.Done(kLong));
  EXPECT_TRUE(StatusIs(old.status(), absl::StatusCode::kAborted, {}));
  seq_->Leave("w5", 0);
  ASSERT_TRUE(EnterNow("w5", 1, absl::ZeroDuration()).ok());
  seq_->Leave("w5", 1);
}

TEST_F(JobSequencerTest, DeadlineEndsTheWait) {
  ASSERT_TRUE(EnterNow("w0", 0).ok());
  const absl::Time start = absl::Now();
  EXPECT_TRUE(StatusIs(EnterNow("w0", 3, kBlocked),
                       absl::StatusCode::kDeadlineExceeded,
                       {"deadline", "3 earlier job(s)"}));
  EXPECT_GE(absl::Now() - start, kBlocked);
  seq_->Leave("w0", 0);
}

TEST_F(JobSequencerTest, CancellationEndsTheWait) {
  ASSERT_TRUE(EnterNow("w0", 0).ok());
  Entrant next(seq_.get(), "w0", 1);
  ASSERT_TRUE(next.WaitUntilWaiting());
  EXPECT_FALSE(next.Done(kBlocked));
  next.Cancel();
  ASSERT_TRUE(next.Done(kLong));
  EXPECT_TRUE(
      StatusIs(next.status(), absl::StatusCode::kCancelled, {"cancelled"}));
  seq_->Leave("w0", 0);
}

}  // namespace
}  // namespace shardmap
