// Tests of worker/transport/grpc/peer_inbox: whole and fragmented messages, waiting,
// fingerprint and size checks, lost streams, abort and deadline, forgotten
// jobs, and fragments that do not fit their message.
#include "worker/transport/grpc/peer_inbox.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "tests/unit/status_matchers.h"

namespace shardmap {
namespace {

// How long a Take that must time out waits.
constexpr absl::Duration kShort = absl::Milliseconds(50);
// A bound on waits that must end early; never reached when all is well.
constexpr absl::Duration kLong = absl::Seconds(10);

const Fingerprint kPsum{0x1234, "psum(axes=('x',), float32[4])"};
const Fingerprint kAllGather{0x9876, "all_gather(axes=('x',), float32[2])"};

absl::Status NotAborted() { return absl::OkStatus(); }

v1::PeerFrame MakeFrame(const std::string& job, int64_t device, uint64_t seq,
                        uint32_t step, const Fingerprint& fp, uint64_t total,
                        uint64_t offset, const std::string& data,
                        bool with_text = true) {
  v1::PeerFrame f;
  f.set_job_id(job);
  f.set_from_device(device);
  f.set_seq(seq);
  f.set_step(step);
  f.set_fingerprint(fp.hash);
  if (with_text) f.set_fingerprint_text(fp.text);
  f.set_total_bytes(total);
  f.set_offset(offset);
  f.set_data(data);
  return f;
}

// A whole message in one frame.
v1::PeerFrame Whole(const std::string& job, int64_t device, uint64_t seq,
                    uint32_t step, const Fingerprint& fp,
                    const std::string& data) {
  return MakeFrame(job, device, seq, step, fp, data.size(), 0, data);
}

// `f` as the receiving stream sees it: encoded as a sender does, then
// decoded.
DecodedFrame OverTheWire(v1::PeerFrame f) {
  const std::string data = std::move(*f.mutable_data());
  f.clear_data();
  absl::StatusOr<DecodedFrame> decoded = DecodeFrame(EncodeFrame(
      f, absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(data.data()),
                             data.size())));
  EXPECT_TRUE(decoded.ok()) << decoded.status();
  return *std::move(decoded);
}

class PeerInboxTest : public ::testing::Test {
 protected:
  static PeerInbox::Want WantOf(const std::string& job, int64_t device,
                                uint64_t seq, uint32_t step,
                                const Fingerprint& fp = kPsum) {
    PeerInbox::Want w;
    w.job_id = job;
    w.from_device = device;
    w.from_address = absl::StrCat("10.0.0.", device, ":5000");
    w.seq = seq;
    w.step = step;
    w.fingerprint = &fp;
    return w;
  }

  absl::Status Take(const PeerInbox::Want& want, std::string* out,
                    absl::Duration timeout = kLong) {
    return inbox_.Take(
        want,
        absl::MakeSpan(reinterpret_cast<uint8_t*>(out->data()), out->size()),
        absl::Now() + timeout, NotAborted);
  }

  void MustDeliver(v1::PeerFrame f) {
    absl::Status s = inbox_.Deliver(OverTheWire(std::move(f)));
    ASSERT_TRUE(s.ok()) << s;
  }

  PeerInbox inbox_;
};

TEST_F(PeerInboxTest, WholeMessage) {
  MustDeliver(Whole("j1", 2, 0, 0, kPsum, "abcdefgh"));
  std::string out(8, '\0');
  absl::Status s = Take(WantOf("j1", 2, 0, 0), &out);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(out, "abcdefgh");
  // Taken once only.
  EXPECT_TRUE(StatusIs(Take(WantOf("j1", 2, 0, 0), &out, kShort),
                       absl::StatusCode::kDeadlineExceeded, {}));
}

TEST_F(PeerInboxTest, FragmentedMessage) {
  const std::string data = "0123456789abcdefXYZ";
  const uint64_t n = data.size();
  MustDeliver(MakeFrame("j1", 1, 3, 2, kPsum, n, 0, data.substr(0, 7)));
  // Not yet whole.
  std::string out(n, '\0');
  EXPECT_TRUE(StatusIs(Take(WantOf("j1", 1, 3, 2), &out, kShort),
                       absl::StatusCode::kDeadlineExceeded, {}));
  MustDeliver(MakeFrame("j1", 1, 3, 2, kPsum, n, 7, data.substr(7, 10), false));
  MustDeliver(MakeFrame("j1", 1, 3, 2, kPsum, n, 17, data.substr(17), false));
  absl::Status s = Take(WantOf("j1", 1, 3, 2), &out);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(out, data);
}

TEST_F(PeerInboxTest, MessagesAreKeyedByJobDeviceSeqAndStep) {
  MustDeliver(Whole("j1", 0, 0, 0, kPsum, "a"));
  MustDeliver(Whole("j1", 0, 0, 1, kPsum, "b"));
  MustDeliver(Whole("j1", 0, 1, 0, kPsum, "c"));
  MustDeliver(Whole("j1", 1, 0, 0, kPsum, "d"));
  MustDeliver(Whole("j2", 0, 0, 0, kPsum, "e"));
  std::string out(1, '\0');
  const struct {
    const char* job;
    int64_t device;
    uint64_t seq;
    uint32_t step;
    char want;
  } cases[] = {{"j2", 0, 0, 0, 'e'},
               {"j1", 1, 0, 0, 'd'},
               {"j1", 0, 1, 0, 'c'},
               {"j1", 0, 0, 1, 'b'},
               {"j1", 0, 0, 0, 'a'}};
  for (const auto& c : cases) {
    absl::Status s = Take(WantOf(c.job, c.device, c.seq, c.step), &out);
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(out[0], c.want);
  }
}

TEST_F(PeerInboxTest, EmptyMessage) {
  MustDeliver(Whole("j1", 0, 0, 0, kPsum, ""));
  std::string out;
  absl::Status s = Take(WantOf("j1", 0, 0, 0), &out);
  EXPECT_TRUE(s.ok()) << s;
}

TEST_F(PeerInboxTest, TakeWaitsForALaterDelivery) {
  const std::string data(3000, 'q');
  absl::Notification waiting;
  std::thread sender([&] {
    ASSERT_TRUE(waiting.WaitForNotificationWithTimeout(kLong));
    for (uint64_t off = 0; off < data.size(); off += 1000) {
      ASSERT_TRUE(inbox_
                      .Deliver(OverTheWire(
                          MakeFrame("j1", 4, 2, 0, kPsum, data.size(), off,
                                    data.substr(off, 1000), off == 0)))
                      .ok());
    }
  });
  std::string out(data.size(), '\0');
  const absl::Time start = absl::Now();
  absl::Status s = inbox_.Take(
      WantOf("j1", 4, 2, 0),
      absl::MakeSpan(reinterpret_cast<uint8_t*>(out.data()), out.size()),
      absl::Now() + kLong, [&] {
        if (!waiting.HasBeenNotified()) waiting.Notify();
        return absl::OkStatus();
      });
  sender.join();
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(out, data);
  EXPECT_LT(absl::Now() - start, kLong / 2);
}

TEST_F(PeerInboxTest, FingerprintMismatchNamesBoth) {
  MustDeliver(Whole("j1", 2, 5, 0, kAllGather, "abcd"));
  std::string out(4, '\0');
  EXPECT_TRUE(
      StatusIs(Take(WantOf("j1", 2, 5, 0, kPsum), &out),
               absl::StatusCode::kInvalidArgument,
               {kPsum.text, kAllGather.text, "device 2", "collective #5"}));
}

TEST_F(PeerInboxTest, MismatchAtAnotherStepFailsAtOnce) {
  // The sender called another collective as #5, whose message of step 1
  // arrived; ours waits for step 0, which will never come.
  MustDeliver(Whole("j1", 2, 5, 1, kAllGather, "abcd"));
  std::string out(4, '\0');
  const absl::Time start = absl::Now();
  EXPECT_TRUE(StatusIs(Take(WantOf("j1", 2, 5, 0, kPsum), &out),
                       absl::StatusCode::kInvalidArgument,
                       {kPsum.text, kAllGather.text}));
  EXPECT_LT(absl::Now() - start, kLong / 2);
}

TEST_F(PeerInboxTest, MatchAtAnotherStepDoesNotFail) {
  MustDeliver(Whole("j1", 2, 5, 1, kPsum, "abcd"));
  // Nor does a mismatch of another collective or another sender.
  MustDeliver(Whole("j1", 2, 6, 1, kAllGather, "abcd"));
  MustDeliver(Whole("j1", 3, 5, 1, kAllGather, "abcd"));
  std::string out(4, '\0');
  EXPECT_TRUE(StatusIs(Take(WantOf("j1", 2, 5, 0, kPsum), &out, kShort),
                       absl::StatusCode::kDeadlineExceeded, {}));
  EXPECT_TRUE(Take(WantOf("j1", 2, 5, 1, kPsum), &out).ok());
}

TEST_F(PeerInboxTest, SizeMismatch) {
  MustDeliver(Whole("j1", 2, 0, 0, kPsum, "12345678"));
  std::string out(4, '\0');
  EXPECT_TRUE(StatusIs(Take(WantOf("j1", 2, 0, 0), &out),
                       absl::StatusCode::kInvalidArgument,
                       {kPsum.text, "device 2", "sent 8 bytes", "4 were"}));
}

TEST_F(PeerInboxTest, LostStreamFailsTake) {
  inbox_.StreamOpened("10.0.0.2:5000", 7);
  inbox_.StreamLost("10.0.0.2:5000", 7);
  std::string out(4, '\0');
  EXPECT_TRUE(StatusIs(Take(WantOf("j1", 2, 0, 0), &out),
                       absl::StatusCode::kUnavailable,
                       {"10.0.0.2:5000", "device 2", kPsum.text}));
  // Another sender is unaffected.
  EXPECT_TRUE(StatusIs(Take(WantOf("j1", 3, 0, 0), &out, kShort),
                       absl::StatusCode::kDeadlineExceeded, {}));
  // Reconnecting clears it.
  inbox_.StreamOpened("10.0.0.2:5000", 7);
  EXPECT_TRUE(StatusIs(Take(WantOf("j1", 2, 0, 0), &out, kShort),
                       absl::StatusCode::kDeadlineExceeded, {}));
}

TEST_F(PeerInboxTest, LostStreamWakesAWaitingTake) {
  inbox_.StreamOpened("10.0.0.2:5000", 7);
  absl::Notification waiting;
  std::thread breaker([&] {
    ASSERT_TRUE(waiting.WaitForNotificationWithTimeout(kLong));
    inbox_.StreamLost("10.0.0.2:5000", 7);
  });
  std::string out(4, '\0');
  const absl::Time start = absl::Now();
  absl::Status s = inbox_.Take(
      WantOf("j1", 2, 0, 0),
      absl::MakeSpan(reinterpret_cast<uint8_t*>(out.data()), out.size()),
      absl::Now() + kLong, [&] {
        if (!waiting.HasBeenNotified()) waiting.Notify();
        return absl::OkStatus();
      });
  breaker.join();
  EXPECT_TRUE(StatusIs(s, absl::StatusCode::kUnavailable, {"10.0.0.2:5000"}));
  EXPECT_LT(absl::Now() - start, kLong / 2);
}

TEST_F(PeerInboxTest, MessageThatArrivedBeforeTheLossIsStillTaken) {
  inbox_.StreamOpened("10.0.0.2:5000", 7);
  MustDeliver(Whole("j1", 2, 0, 0, kPsum, "abcd"));
  inbox_.StreamLost("10.0.0.2:5000", 7);
  std::string out(4, '\0');
  absl::Status s = Take(WantOf("j1", 2, 0, 0), &out);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(out, "abcd");
}

TEST_F(PeerInboxTest, SenderWithAnotherOpenStreamIsNotLost) {
  inbox_.StreamOpened("10.0.0.2:5000", 7);
  inbox_.StreamOpened("10.0.0.2:5000", 7);
  inbox_.StreamLost("10.0.0.2:5000", 7);
  std::string out(4, '\0');
  EXPECT_TRUE(StatusIs(Take(WantOf("j1", 2, 0, 0), &out, kShort),
                       absl::StatusCode::kDeadlineExceeded, {}));
  inbox_.StreamLost("10.0.0.2:5000", 7);
  EXPECT_TRUE(StatusIs(Take(WantOf("j1", 2, 0, 0), &out),
                       absl::StatusCode::kUnavailable, {"10.0.0.2:5000"}));
}

TEST_F(PeerInboxTest, LossOfAnEarlierProcessDoesNotFailTheNewOne) {
  // The worker at 10.0.0.2:5000 was process 7; its stream broke, and it
  // came back as process 8, which has not sent anything yet.
  inbox_.StreamOpened("10.0.0.2:5000", 7);
  inbox_.StreamLost("10.0.0.2:5000", 7);
  std::string out(4, '\0');
  PeerInbox::Want want = WantOf("j1", 2, 0, 0);
  want.from_incarnation = 8;
  // Waits for process 8 instead of failing on process 7's loss...
  EXPECT_TRUE(StatusIs(Take(want, &out, kShort),
                       absl::StatusCode::kDeadlineExceeded, {}));
  // ...and takes its message once it comes.
  inbox_.StreamOpened("10.0.0.2:5000", 8);
  MustDeliver(Whole("j1", 2, 0, 0, kPsum, "wxyz"));
  absl::Status s = Take(want, &out);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(out, "wxyz");
  // A job that expects process 7 still learns it is lost.
  want.from_incarnation = 7;
  EXPECT_TRUE(StatusIs(Take(want, &out), absl::StatusCode::kUnavailable,
                       {"10.0.0.2:5000"}));
  // Process 8's loss fails the jobs that expect it.
  inbox_.StreamLost("10.0.0.2:5000", 8);
  want.from_incarnation = 8;
  EXPECT_TRUE(StatusIs(Take(want, &out), absl::StatusCode::kUnavailable,
                       {"10.0.0.2:5000"}));
}

TEST_F(PeerInboxTest, AbortedReturnsItsStatus) {
  std::string out(4, '\0');
  std::atomic<int> calls{0};
  absl::Status s = inbox_.Take(
      WantOf("j1", 2, 0, 0),
      absl::MakeSpan(reinterpret_cast<uint8_t*>(out.data()), out.size()),
      absl::Now() + kLong, [&] {
        // Aborts on the third check, as if the job failed meanwhile.
        return ++calls >= 3 ? absl::CancelledError("job j1 was cancelled")
                            : absl::OkStatus();
      });
  EXPECT_TRUE(
      StatusIs(s, absl::StatusCode::kCancelled, {"job j1 was cancelled"}));
  EXPECT_EQ(calls.load(), 3);
}

TEST_F(PeerInboxTest, DeadlineNamesTheDevice) {
  std::string out(4, '\0');
  const absl::Time start = absl::Now();
  EXPECT_TRUE(StatusIs(
      Take(WantOf("j1", 3, 7, 0), &out, kShort),
      absl::StatusCode::kDeadlineExceeded,
      {"device 3", "10.0.0.3:5000", kPsum.text, "collective #7", "j1"}));
  EXPECT_GE(absl::Now() - start, kShort);
}

TEST_F(PeerInboxTest, ForgetJobDropsItsMessagesAndLateFrames) {
  MustDeliver(Whole("j1", 2, 0, 0, kPsum, "abcd"));
  MustDeliver(MakeFrame("j1", 2, 1, 0, kPsum, 8, 0, "abcd"));
  MustDeliver(Whole("j2", 2, 0, 0, kPsum, "wxyz"));
  inbox_.ForgetJob("j1");
  std::string out(4, '\0');
  EXPECT_TRUE(StatusIs(Take(WantOf("j1", 2, 0, 0), &out, kShort),
                       absl::StatusCode::kDeadlineExceeded, {}));
  // Late frames of j1 are accepted and dropped, even ones that would not
  // fit.
  EXPECT_TRUE(
      inbox_.Deliver(OverTheWire(Whole("j1", 2, 0, 0, kPsum, "abcd"))).ok());
  EXPECT_TRUE(
      inbox_.Deliver(OverTheWire(MakeFrame("j1", 2, 1, 0, kPsum, 8, 6, "efgh")))
          .ok());
  EXPECT_TRUE(StatusIs(Take(WantOf("j1", 2, 0, 0), &out, kShort),
                       absl::StatusCode::kDeadlineExceeded, {}));
  // Another job is untouched.
  absl::Status s = Take(WantOf("j2", 2, 0, 0), &out);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(out, "wxyz");
}

TEST_F(PeerInboxTest, FragmentGapIsRejected) {
  MustDeliver(MakeFrame("j1", 2, 0, 0, kPsum, 10, 0, "0123"));
  EXPECT_TRUE(StatusIs(
      inbox_.Deliver(
          OverTheWire(MakeFrame("j1", 2, 0, 0, kPsum, 10, 6, "6789", false))),
      absl::StatusCode::kInvalidArgument,
      {"job j1", "device 2", "offset 6", "10 bytes", "4 received"}));
  // A repeated fragment is a gap backwards.
  EXPECT_TRUE(StatusIs(inbox_.Deliver(OverTheWire(MakeFrame(
                           "j1", 2, 0, 0, kPsum, 10, 0, "0123", false))),
                       absl::StatusCode::kInvalidArgument, {"offset 0"}));
}

TEST_F(PeerInboxTest, FirstFragmentNotAtZeroIsRejected) {
  EXPECT_TRUE(StatusIs(inbox_.Deliver(OverTheWire(
                           MakeFrame("j1", 2, 0, 0, kPsum, 10, 4, "4567"))),
                       absl::StatusCode::kInvalidArgument, {"offset 4"}));
}

TEST_F(PeerInboxTest, FragmentOverrunIsRejected) {
  MustDeliver(MakeFrame("j1", 2, 0, 0, kPsum, 10, 0, "0123"));
  EXPECT_TRUE(StatusIs(inbox_.Deliver(OverTheWire(MakeFrame(
                           "j1", 2, 0, 0, kPsum, 10, 4, "456789AB", false))),
                       absl::StatusCode::kInvalidArgument,
                       {"offset 4", "8 bytes"}));
  // A single frame longer than its message.
  EXPECT_TRUE(
      StatusIs(inbox_.Deliver(
                   OverTheWire(MakeFrame("j1", 3, 0, 0, kPsum, 2, 0, "0123"))),
               absl::StatusCode::kInvalidArgument, {"offset 0", "4 bytes"}));
}

TEST_F(PeerInboxTest, FragmentWithAnotherTotalIsRejected) {
  MustDeliver(MakeFrame("j1", 2, 0, 0, kPsum, 10, 0, "0123"));
  EXPECT_TRUE(StatusIs(
      inbox_.Deliver(
          OverTheWire(MakeFrame("j1", 2, 0, 0, kPsum, 12, 4, "4567", false))),
      absl::StatusCode::kInvalidArgument, {"message of 10 bytes"}));
}

TEST_F(PeerInboxTest, ManySendersConcurrently) {
  constexpr int kSenders = 4;
  constexpr int kMessages = 50;
  constexpr size_t kSize = 300;
  auto payload = [](int sender, int m) {
    return std::string(kSize, static_cast<char>('a' + (sender * 7 + m) % 26));
  };
  std::vector<std::thread> threads;
  for (int d = 0; d < kSenders; ++d) {
    threads.emplace_back([&, d] {
      for (int m = 0; m < kMessages; ++m) {
        const std::string data = payload(d, m);
        for (size_t off = 0; off < kSize; off += 100) {
          absl::Status s = inbox_.Deliver(
              OverTheWire(MakeFrame("j1", d, m, 0, kPsum, kSize, off,
                                    data.substr(off, 100), off == 0)));
          EXPECT_TRUE(s.ok()) << s;
        }
      }
    });
  }
  for (int d = 0; d < kSenders; ++d) {
    threads.emplace_back([&, d] {
      std::string out(kSize, '\0');
      for (int m = 0; m < kMessages; ++m) {
        absl::Status s = Take(WantOf("j1", d, m, 0), &out);
        ASSERT_TRUE(s.ok()) << s;
        EXPECT_EQ(out, payload(d, m));
      }
    });
  }
  for (std::thread& th : threads) th.join();
}

}  // namespace
}  // namespace shardmap
