// Tests of rpc/stream_mux.h with a fake stream that completes writes when
// the test says: one write at a time in order, senders held back past the
// byte bound (and released by completions or closing), urgent messages
// never held, closing drops what is queued or keeps it, the drained
// callback once; an inbox hands out its messages before its end, ends at
// its deadline, a drop discards what was not taken, and a signal hears of
// every message and the end (and ChangeSignal itself).
#include "rpc/stream_mux.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"

namespace shardmap {
namespace {

// Records the writes a MuxOutbox starts; the test completes them.
struct FakeStream {
  absl::Mutex mu;
  std::vector<std::string> started ABSL_GUARDED_BY(mu);
  void StartWrite(const std::string* m) {
    absl::MutexLock lock(&mu);
    started.push_back(*m);
  }
  std::vector<std::string> Started() {
    absl::MutexLock lock(&mu);
    return started;
  }
};

TEST(MuxOutboxTest, WritesOneAtATimeInOrder) {
  FakeStream stream;
  MuxOutbox<std::string> outbox(
      1 << 20, [&](const std::string* m) { stream.StartWrite(m); });
  const absl::Time later = absl::Now() + absl::Seconds(10);
  ASSERT_TRUE(outbox.Send("a", 1, later));
  ASSERT_TRUE(outbox.Send("b", 1, later));
  ASSERT_TRUE(outbox.Send("c", 1, later));
  EXPECT_EQ(stream.Started(), std::vector<std::string>({"a"}));
  outbox.WriteDone(true);
  EXPECT_EQ(stream.Started(), std::vector<std::string>({"a", "b"}));
  outbox.WriteDone(true);
  outbox.WriteDone(true);
  EXPECT_EQ(stream.Started(), std::vector<std::string>({"a", "b", "c"}));
  // Nothing in flight now: the next message starts at once.
  ASSERT_TRUE(outbox.Send("d", 1, later));
  EXPECT_EQ(stream.Started(), std::vector<std::string>({"a", "b", "c", "d"}));
}

TEST(MuxOutboxTest, ASenderPastTheBoundWaitsForRoomOrItsDeadline) {
  FakeStream stream;
  MuxOutbox<std::string> outbox(
      10, [&](const std::string* m) { stream.StartWrite(m); });
  const absl::Time later = absl::Now() + absl::Seconds(30);
  ASSERT_TRUE(outbox.Send("big", 11, later));  // over the bound now
  // Held back until its deadline: nothing completes.
  EXPECT_FALSE(outbox.Send("late", 1, absl::Now() + absl::Milliseconds(20)));
  // Urgent messages are never held back.
  EXPECT_TRUE(outbox.Send("urgent", 1, absl::InfinitePast(), true));
  // A held sender goes on once a completion makes room.
  absl::Notification sent;
  std::thread sender([&] {
    EXPECT_TRUE(outbox.Send("next", 1, later));
    sent.Notify();
  });
  // Held while the queue is full.
  EXPECT_FALSE(sent.WaitForNotificationWithTimeout(absl::Milliseconds(50)));
  outbox.WriteDone(true);  // "big" written
  ASSERT_TRUE(sent.WaitForNotificationWithTimeout(absl::Seconds(30)));
  sender.join();
  outbox.WriteDone(true);
  outbox.WriteDone(true);
  EXPECT_EQ(stream.Started(),
            std::vector<std::string>({"big", "urgent", "next"}));
}

TEST(MuxOutboxTest, ClosingReleasesHeldSendersAndDropsTheQueue) {
  FakeStream stream;
  MuxOutbox<std::string> outbox(
      1, [&](const std::string* m) { stream.StartWrite(m); });
  const absl::Time later = absl::Now() + absl::Seconds(30);
  ASSERT_TRUE(outbox.Send("first", 2, later));
  ASSERT_TRUE(outbox.Send("queued", 0, later, true));
  std::thread held([&] { EXPECT_FALSE(outbox.Send("held", 1, later)); });
  int drained = 0;
  outbox.Close([&] { ++drained; });
  held.join();
  EXPECT_EQ(drained, 0);  // "first" is still the stream's
  EXPECT_FALSE(outbox.Send("after", 0, later, true));
  outbox.WriteDone(false);
  EXPECT_EQ(drained, 1);
  EXPECT_EQ(stream.Started(), std::vector<std::string>({"first"}));
  outbox.Close([&] { ++drained; });  // only the first drained callback
  EXPECT_EQ(drained, 1);
}

TEST(MuxOutboxTest, ClosingCanKeepWhatIsQueued) {
  FakeStream stream;
  MuxOutbox<std::string> outbox(
      100, [&](const std::string* m) { stream.StartWrite(m); });
  const absl::Time later = absl::Now() + absl::Seconds(30);
  ASSERT_TRUE(outbox.Send("a", 1, later));
  ASSERT_TRUE(outbox.Send("b", 1, later));
  int drained = 0;
  outbox.Close([&] { ++drained; }, /*keep_queued=*/true);
  outbox.WriteDone(true);
  EXPECT_EQ(drained, 0);
  outbox.WriteDone(true);
  EXPECT_EQ(drained, 1);
  EXPECT_EQ(stream.Started(), std::vector<std::string>({"a", "b"}));
}

TEST(MuxOutboxTest, AFailedWriteClosesTheOutbox) {
  FakeStream stream;
  MuxOutbox<std::string> outbox(
      100, [&](const std::string* m) { stream.StartWrite(m); });
  const absl::Time later = absl::Now() + absl::Seconds(30);
  ASSERT_TRUE(outbox.Send("a", 1, later));
  ASSERT_TRUE(outbox.Send("b", 1, later));
  outbox.WriteDone(false);
  EXPECT_FALSE(outbox.Send("c", 1, later, /*urgent=*/true));
  EXPECT_EQ(stream.Started(), std::vector<std::string>({"a"}));
}

TEST(MuxInboxTest, MessagesComeBeforeTheEnd) {
  MuxInbox<int> inbox;
  inbox.Push(1);
  inbox.Push(2);
  inbox.End(absl::InvalidArgumentError("x"));
  inbox.Push(3);  // after the end: dropped
  const absl::Time later = absl::Now() + absl::Seconds(10);
  int m = 0;
  ASSERT_TRUE(inbox.Pop(&m, later));
  EXPECT_EQ(m, 1);
  ASSERT_TRUE(inbox.Pop(&m, later));
  EXPECT_EQ(m, 2);
  EXPECT_FALSE(inbox.Pop(&m, later));
  EXPECT_EQ(inbox.status().code(), absl::StatusCode::kInvalidArgument);
  inbox.End(absl::OkStatus());  // the first end counts
  EXPECT_EQ(inbox.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(MuxInboxTest, APopWaitsForAMessageOrItsDeadline) {
  MuxInbox<int> inbox;
  int m = 0;
  std::thread pusher([&] { inbox.Push(7); });
  ASSERT_TRUE(inbox.Pop(&m, absl::Now() + absl::Seconds(30)));
  EXPECT_EQ(m, 7);
  pusher.join();
  EXPECT_FALSE(inbox.Pop(&m, absl::Now() + absl::Milliseconds(10)));
  EXPECT_EQ(inbox.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(inbox.ended());
}

TEST(MuxInboxTest, AnEndWithDropDiscardsWhatWasNotTaken) {
  MuxInbox<int> inbox;
  inbox.Push(1);
  inbox.End(absl::CancelledError("gone"), /*drop=*/true);
  int m = 0;
  EXPECT_FALSE(inbox.Pop(&m, absl::Now() + absl::Seconds(10)));
  EXPECT_EQ(inbox.status().code(), absl::StatusCode::kCancelled);
}

TEST(MuxInboxTest, ASignalHearsOfEveryPushAndTheEnd) {
  MuxInbox<int> inbox;
  ChangeSignal signal;
  inbox.SetSignal(&signal);
  EXPECT_FALSE(inbox.ready());
  uint64_t seen = signal.generation();
  std::thread pusher([&] { inbox.Push(1); });
  ASSERT_TRUE(signal.WaitChanged(seen, absl::Now() + absl::Seconds(30)));
  pusher.join();
  EXPECT_TRUE(inbox.ready());
  int m = 0;
  ASSERT_TRUE(inbox.Pop(&m, absl::Now()));
  EXPECT_EQ(m, 1);
  EXPECT_FALSE(inbox.ready());
  seen = signal.generation();
  inbox.End(absl::CancelledError("gone"));
  EXPECT_NE(signal.generation(), seen);
  EXPECT_TRUE(inbox.ready());  // Pop would not wait: it says the end
}

TEST(ChangeSignalTest, AWaitEndsAtAChangeOrItsDeadline) {
  ChangeSignal signal;
  const uint64_t seen = signal.generation();
  EXPECT_FALSE(signal.WaitChanged(seen, absl::Now() + absl::Milliseconds(5)));
  signal.Notify();
  // A change before the wait is not missed.
  EXPECT_TRUE(signal.WaitChanged(seen, absl::InfinitePast()));
  EXPECT_FALSE(signal.WaitChanged(signal.generation(), absl::InfinitePast()));
}

}  // namespace
}  // namespace shardmap
