// Tests of the shared-memory channel (worker/shm_*): messages of any size
// streaming through a small ring, keyed out-of-order takes, the
// fingerprint and size checks, spilling when nobody reads, bounded waits,
// the death of the other process (a forked child), and the Attach
// handshake between two ShmNetworks over a real gRPC server on 127.0.0.1.
// The collective algorithms themselves run over these channels in
// collectives_test and communicator_test (their "shm." variants).
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "rpc/channel.h"
#include "rpc/channel_cache.h"
#include "tests/unit/shm_pair.h"
#include "tests/unit/status_matchers.h"
#include "tests/unit/wait_until.h"
#include "worker/shm_network.h"
#include "worker/transport/shm/shm_receiver.h"
#include "worker/transport/shm/shm_ring.h"
#include "worker/transport/shm/shm_sender.h"

namespace shardmap {
namespace {

using Bytes = std::vector<uint8_t>;

const auto kNever = [] { return absl::OkStatus(); };

// A pattern no two messages of a test share.
Bytes Pattern(size_t n, uint8_t salt) {
  Bytes b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(i * 31 + salt);
  return b;
}

ShmMessageKey Key(uint64_t seq, uint32_t step, const std::string& job = "j") {
  return ShmMessageKey{job, 0, 1, seq, step};
}

absl::Time In(absl::Duration d) { return absl::Now() + d; }

TEST(ShmRingTest, AttachChecksNonceAndSize) {
  auto writer = ShmRing::Create(4096);
  ASSERT_TRUE(writer.ok()) << writer.status();
  EXPECT_FALSE((*writer)->PeerAlive());  // nobody attached yet
  EXPECT_TRUE(StatusIs(
      ShmRing::Attach((*writer)->name(), (*writer)->nonce() + 1, 4096).status(),
      absl::StatusCode::kPermissionDenied, {"ring header"}));
  EXPECT_TRUE(StatusIs(
      ShmRing::Attach((*writer)->name(), (*writer)->nonce(), 8192).status(),
      absl::StatusCode::kPermissionDenied, {"0600 object of"}));
  EXPECT_TRUE(StatusIs(ShmRing::Create(1000).status(),
                       absl::StatusCode::kInvalidArgument, {"4096"}));
  auto reader = ShmRing::Attach((*writer)->name(), (*writer)->nonce(), 4096);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_TRUE((*writer)->PeerAlive());
  EXPECT_TRUE((*reader)->PeerAlive());
  (*writer)->Unlink();
  EXPECT_FALSE(
      ShmRing::Attach((*writer)->name(), (*writer)->nonce(), 4096).ok());
  reader->reset();
  EXPECT_FALSE((*writer)->PeerAlive());  // the reader unmapped it
}

// Messages many times the ring's size, sent while the receiver reads,
// arrive intact and in any order asked for; nothing is left behind.
TEST(ShmChannelTest, LargeMessagesStreamThroughASmallRing) {
  Channel c(64 << 10);
  const Fingerprint fp{42, "psum(float32[...])"};
  const std::vector<size_t> sizes = {0, 1, 4095, 64 << 10, (3 << 20) + 17};
  std::thread sender([&] {
    for (size_t i = 0; i < sizes.size(); ++i) {
      const Bytes data = Pattern(sizes[i], static_cast<uint8_t>(i));
      EXPECT_TRUE(c.sender
                      ->Send(Key(0, static_cast<uint32_t>(i)), fp, data,
                             In(absl::Seconds(20)), kNever)
                      .ok());
    }
  });
  // Last first: everything before it is stashed on the way.
  for (size_t i : {4, 0, 3, 1, 2}) {
    Bytes out(sizes[i]);
    ASSERT_TRUE(c.receiver
                    ->Take(Key(0, static_cast<uint32_t>(i)), fp,
                           absl::MakeSpan(out), In(absl::Seconds(20)), kNever)
                    .ok());
    EXPECT_EQ(out, Pattern(sizes[i], static_cast<uint8_t>(i))) << i;
  }
  sender.join();
  EXPECT_EQ(c.receiver->Pending(), 0u);
  EXPECT_EQ(c.sender->SpilledBytes(), 0u);
}

// Nobody reads: Send spills instead of blocking, so two peers that both
// send first cannot deadlock; the bytes arrive once the receiver reads.
TEST(ShmChannelTest, SendDoesNotWaitForAnAbsentReader) {
  Channel c(64 << 10);
  const Fingerprint fp{1, "ppermute"};
  const Bytes big = Pattern(2 << 20, 9);
  const absl::Time start = absl::Now();
  ASSERT_TRUE(
      c.sender->Send(Key(3, 0), fp, big, In(absl::Seconds(5)), kNever).ok());
  ASSERT_TRUE(
      c.sender
          ->Send(Key(3, 1), fp, Pattern(10, 1), In(absl::Seconds(5)), kNever)
          .ok());
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  EXPECT_GT(c.sender->SpilledBytes(), 0u);
  Bytes out(big.size()), small(10);
  ASSERT_TRUE(c.receiver
                  ->Take(Key(3, 1), fp, absl::MakeSpan(small),
                         In(absl::Seconds(10)), kNever)
                  .ok());
  ASSERT_TRUE(c.receiver
                  ->Take(Key(3, 0), fp, absl::MakeSpan(out),
                         In(absl::Seconds(10)), kNever)
                  .ok());
  EXPECT_EQ(out, big);
  EXPECT_EQ(small, Pattern(10, 1));
}

TEST(ShmChannelTest, FingerprintAndSizeMismatchesNameBoth) {
  Channel c;
  const Fingerprint mine{1, "psum(axes=('x',), float32[2])"};
  const Fingerprint theirs{2, "pmax(axes=('x',), float32[2])"};
  Bytes eight(8), twelve(12);
  ASSERT_TRUE(
      c.sender->Send(Key(4, 0), theirs, eight, In(absl::Seconds(1)), kNever)
          .ok());
  // Waiting for step 1, the receiver meets step 0 of the same collective
  // with another fingerprint: it fails at once rather than at the timeout.
  const absl::Time start = absl::Now();
  EXPECT_TRUE(StatusIs(
      c.receiver->Take(Key(4, 1), mine, absl::MakeSpan(eight),
                       In(absl::Seconds(10)), kNever),
      absl::StatusCode::kInvalidArgument,
      {"collective mismatch", mine.text, theirs.text, "collective #4"}));
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  EXPECT_TRUE(StatusIs(c.receiver->Take(Key(4, 0), mine, absl::MakeSpan(eight),
                                        In(absl::Seconds(1)), kNever),
                       absl::StatusCode::kInvalidArgument,
                       {mine.text, theirs.text}));
  ASSERT_TRUE(
      c.sender->Send(Key(5, 0), mine, twelve, In(absl::Seconds(1)), kNever)
          .ok());
  EXPECT_TRUE(StatusIs(c.receiver->Take(Key(5, 0), mine, absl::MakeSpan(eight),
                                        In(absl::Seconds(1)), kNever),
                       absl::StatusCode::kInvalidArgument,
                       {"sent 12 bytes where 8 were expected"}));
  EXPECT_EQ(c.receiver->Pending(), 0u);
}

// A peer already in the next job: its message waits; a forgotten job's
// messages, stashed or late, are dropped.
TEST(ShmChannelTest, JobsAreKeptApartAndForgotten) {
  Channel c;
  const Fingerprint fp{7, "psum"};
  Bytes out(4);
  ASSERT_TRUE(c.sender
                  ->Send(Key(0, 0, "old"), fp, Pattern(4, 1),
                         In(absl::Seconds(1)), kNever)
                  .ok());
  ASSERT_TRUE(c.sender
                  ->Send(Key(0, 0, "next"), fp, Pattern(4, 2),
                         In(absl::Seconds(1)), kNever)
                  .ok());
  ASSERT_TRUE(c.sender
                  ->Send(Key(0, 0, "now"), fp, Pattern(4, 3),
                         In(absl::Seconds(1)), kNever)
                  .ok());
  ASSERT_TRUE(c.receiver
                  ->Take(Key(0, 0, "now"), fp, absl::MakeSpan(out),
                         In(absl::Seconds(1)), kNever)
                  .ok());
  EXPECT_EQ(out, Pattern(4, 3));
  EXPECT_EQ(c.receiver->Pending(), 2u);  // "old" and "next", stashed
  c.receiver->ForgetJob("old");
  EXPECT_EQ(c.receiver->Pending(), 1u);
  ASSERT_TRUE(c.sender
                  ->Send(Key(1, 0, "old"), fp, Pattern(4, 4),
                         In(absl::Seconds(1)), kNever)
                  .ok());
  ASSERT_TRUE(c.receiver
                  ->Take(Key(0, 0, "next"), fp, absl::MakeSpan(out),
                         In(absl::Seconds(1)), kNever)
                  .ok());
  EXPECT_EQ(out, Pattern(4, 2));
  EXPECT_TRUE(
      StatusIs(c.receiver->Take(Key(1, 0, "old"), fp, absl::MakeSpan(out),
                                In(absl::Milliseconds(50)), kNever),
               absl::StatusCode::kDeadlineExceeded, {}));
  EXPECT_EQ(c.receiver->Pending(), 0u);  // the late one was read and dropped
}

TEST(ShmChannelTest, WaitsAreBoundedAndAbortable) {
  Channel c;
  const Fingerprint fp{7, "psum"};
  Bytes out(4);
  absl::Time start = absl::Now();
  EXPECT_TRUE(StatusIs(c.receiver->Take(Key(0, 0), fp, absl::MakeSpan(out),
                                        In(absl::Milliseconds(100)), kNever),
                       absl::StatusCode::kDeadlineExceeded, {"the sender"}));
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));

  // The abort check is polled by the waiting Take itself: its first poll
  // tells the test that the Take waits (and finds no abort yet), so the
  // abort comes while it waits, never before.
  std::atomic<bool> abort{false};
  absl::Notification polled;
  auto aborted = [&] {
    const bool now = abort.load();
    if (!polled.HasBeenNotified()) polled.Notify();  // one waiter calls this
    return now ? absl::CancelledError("job 12 cancelled") : absl::OkStatus();
  };
  absl::Status blocked;
  std::thread waiter([&] {
    blocked = c.receiver->Take(Key(0, 0), fp, absl::MakeSpan(out),
                               In(absl::Seconds(30)), aborted);
  });
  EXPECT_TRUE(polled.WaitForNotificationWithTimeout(absl::Seconds(30)));
  abort = true;
  start = absl::Now();
  waiter.join();
  EXPECT_TRUE(
      StatusIs(blocked, absl::StatusCode::kCancelled, {"job 12 cancelled"}));
  // Seen within a wait slice or so, not at the Take's own deadline.
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));

  // A second taker of the same channel waits for the first, also bounded.
  absl::Status first, second;
  std::thread t1([&] {
    first = c.receiver->Take(Key(1, 0), fp, absl::MakeSpan(out),
                             In(absl::Milliseconds(300)), kNever);
  });
  Bytes out2(4);
  std::thread t2([&] {
    second = c.receiver->Take(Key(1, 1), fp, absl::MakeSpan(out2),
                              In(absl::Milliseconds(300)), kNever);
  });
  t1.join();
  t2.join();
  EXPECT_EQ(first.code(), absl::StatusCode::kDeadlineExceeded) << first;
  EXPECT_EQ(second.code(), absl::StatusCode::kDeadlineExceeded) << second;
}

// The other end of DeadPeerProcessIsUnavailable: this test binary run
// again (fork and an immediate exec), never a bare fork. A forked copy of
// this process, which has gRPC's threads, could block for good on a lock
// one of them held at the fork (it did, rarely, under load). The role and
// its pipe ends come in the environment; it runs before any test.
constexpr char kRoleVariable[] = "SHARDMAP_SHM_TEST_ROLE";

// "writer IN OUT": makes a ring, tells its name and nonce on OUT, waits
// for a byte on IN, starts a 1 MiB message nobody reads, and waits to be
// killed. "reader IN OUT NAME NONCE": attaches, says y or n on OUT, and
// waits to be killed.
int RunRole(const std::string& role) {
  std::istringstream words(role);
  std::string kind;
  int in = -1, out = -1;
  words >> kind >> in >> out;
  if (kind == "writer") {
    auto writer = ShmRing::Create(64 << 10);
    if (!writer.ok()) return 2;
    const std::string line =
        absl::StrCat((*writer)->name(), " ", (*writer)->nonce(), "\n");
    (void)!write(out, line.data(), line.size());
    ShmSender sender(*std::move(writer), ShmSender::Options{"parent"});
    const Bytes big = Pattern(1 << 20, 5);
    char c = 0;
    (void)!read(in, &c, 1);  // the parent attached
    sender
        .Send(Key(0, 0), Fingerprint{7, "psum"}, big, absl::InfiniteFuture(),
              kNever)
        .IgnoreError();
    for (;;) pause();
  }
  if (kind == "reader") {
    std::string name;
    uint64_t nonce = 0;
    words >> name >> nonce;
    auto reader = ShmRing::Attach(name, nonce, 64 << 10);
    (void)!write(out, reader.ok() ? "y" : "n", 1);
    for (;;) pause();
  }
  return 2;
}

const bool kRunsARole = [] {
  const char* role = getenv(kRoleVariable);
  if (role != nullptr) _exit(RunRole(role));
  return false;
}();

// A process running `role` (see RunRole; `args` follow its pipe ends)
// with a pipe each way: `*to` is written to it, `*from` read from it.
pid_t SpawnRole(const std::string& role, const std::string& args, int* to,
                int* from) {
  int down[2], up[2];
  if (pipe(down) != 0 || pipe(up) != 0) return -1;
  const std::string env = absl::StrCat(kRoleVariable, "=", role, " ", down[0],
                                       " ", up[1], " ", args);
  // Built before the fork: the child only execs.
  char* const argv[] = {const_cast<char*>("shm_test"), nullptr};
  char* const envp[] = {const_cast<char*>(env.c_str()), nullptr};
  const pid_t child = fork();
  if (child == 0) {
    execve("/proc/self/exe", argv, envp);
    _exit(127);
  }
  close(down[0]);
  close(up[1]);
  *to = down[1];
  *from = up[0];
  return child;
}

// The other end is a real process that dies by SIGKILL: the survivor's
// wait ends with UNAVAILABLE within a wait slice or two, never a hang.
TEST(ShmChannelTest, DeadPeerProcessIsUnavailable) {
  const Fingerprint fp{7, "psum"};
  // 1. The child writes half a message and dies; we wait for the rest.
  {
    int to = -1, from = -1;
    const pid_t child = SpawnRole("writer", "", &to, &from);
    ASSERT_GT(child, 0);
    std::string line;
    char c = 0;
    while (read(from, &c, 1) == 1 && c != '\n') line.push_back(c);
    std::istringstream words(line);
    std::string name;
    uint64_t nonce = 0;
    ASSERT_TRUE(words >> name >> nonce) << "the child said '" << line << "'";
    auto reader = ShmRing::Attach(name, nonce, 64 << 10);
    ASSERT_TRUE(reader.ok()) << reader.status();
    (*reader)->Unlink();
    const ShmRing* ring = reader->get();
    ShmReceiver receiver(*std::move(reader), "worker child");
    (void)!write(to, "r", 1);
    // Kill the child once its message has started to arrive (nothing reads
    // the ring meanwhile).
    EXPECT_TRUE(WaitUntil([ring] { return ring->Readable() > 0; }))
        << "the child wrote nothing";
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    Bytes out(1 << 20);
    const absl::Time start = absl::Now();
    EXPECT_TRUE(StatusIs(receiver.Take(Key(0, 0), fp, absl::MakeSpan(out),
                                       In(absl::Seconds(20)), kNever),
                         absl::StatusCode::kUnavailable,
                         {"lost worker child", "exited"}));
    EXPECT_LT(absl::Now() - start, absl::Seconds(2));
    close(to);
    close(from);
  }
  // 2. The child reads nothing and dies; our sender learns it.
  {
    auto writer = ShmRing::Create(64 << 10);
    ASSERT_TRUE(writer.ok());
    int to = -1, from = -1;
    const pid_t child = SpawnRole(
        "reader", absl::StrCat((*writer)->name(), " ", (*writer)->nonce()), &to,
        &from);
    ASSERT_GT(child, 0);
    char c = 0;
    ASSERT_EQ(read(from, &c, 1), 1);
    ASSERT_EQ(c, 'y');
    (*writer)->Unlink();
    ShmSender sender(*std::move(writer), ShmSender::Options{"worker child"});
    EXPECT_TRUE(sender.Usable());
    const Bytes big = Pattern(1 << 20, 5);
    ASSERT_TRUE(
        sender.Send(Key(0, 0), fp, big, In(absl::Seconds(5)), kNever).ok());
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    const absl::Time start = absl::Now();
    while (sender.Usable() && absl::Now() - start < absl::Seconds(5)) {
      absl::SleepFor(absl::Milliseconds(5));
    }
    EXPECT_FALSE(sender.Usable());
    EXPECT_TRUE(
        StatusIs(sender.Send(Key(0, 1), fp, big, In(absl::Seconds(5)), kNever),
                 absl::StatusCode::kUnavailable, {"worker child"}));
    close(to);
    close(from);
  }
}

TEST(ShmNetworkTest, HostIdentityIsStableAndSpecific) {
  const std::string id = ShmNetwork::LocalHostIdentity();
  EXPECT_FALSE(id.empty());
  EXPECT_EQ(id, ShmNetwork::LocalHostIdentity());
  EXPECT_NE(id.find("boot="), std::string::npos) << id;
  EXPECT_NE(id.find(";ipc="), std::string::npos) << id;
}

TEST(ShmNetworkTest, SameHostPeersAttachAndExchange) {
  Pair p(ShmNetwork::Options{});
  std::shared_ptr<ShmSender> sender =
      p.a->SenderTo(p.b_address, In(absl::Seconds(5)));
  ASSERT_NE(sender, nullptr);
  EXPECT_EQ(p.a->SenderTo(p.b_address, In(absl::Seconds(5))), sender);
  std::shared_ptr<ShmReceiver> receiver = p.b->ReceiverFrom("a:1");
  ASSERT_NE(receiver, nullptr);
  const Fingerprint fp{3, "all_gather"};
  const Bytes data = Pattern(300 << 10, 4);
  ASSERT_TRUE(
      sender->Send(Key(0, 0), fp, data, In(absl::Seconds(5)), kNever).ok());
  Bytes out(data.size());
  ASSERT_TRUE(receiver
                  ->Take(Key(0, 0), fp, absl::MakeSpan(out),
                         In(absl::Seconds(5)), kNever)
                  .ok());
  EXPECT_EQ(out, data);
  // The sender goes away: the next job's end unmaps its channel.
  p.b->ForgetJob("j");
  EXPECT_NE(p.b->ReceiverFrom("a:1"), nullptr);
  sender.reset();
  p.a.reset();
  EXPECT_FALSE(receiver->SenderAlive());
  p.b->ForgetJob("j");
  EXPECT_EQ(p.b->ReceiverFrom("a:1"), nullptr);
}

TEST(ShmNetworkTest, OtherHostsAndNoShmStayOnGrpc) {
  {
    ShmNetwork::Options other;
    other.host_identity = "boot=elsewhere";
    Pair p(other);
    EXPECT_EQ(p.a->SenderTo(p.b_address, In(absl::Seconds(5))), nullptr);
    EXPECT_EQ(p.b->ReceiverFrom("a:1"), nullptr);
  }
  {
    ShmNetwork::Options off;
    off.enabled = false;
    Pair p(off);
    EXPECT_EQ(p.a->SenderTo(p.b_address, In(absl::Seconds(5))), nullptr);
    EXPECT_EQ(p.b->ReceiverFrom("a:1"), nullptr);
  }
}

// A ShmPeer whose Attach always fails, as an unreachable or stopped peer's
// does; it counts the calls.
class FailingShmPeer final : public v1::ShmPeer::Service {
 public:
  grpc::Status Attach(grpc::ServerContext*, const v1::ShmAttachRequest*,
                      v1::ShmAttachResponse*) override {
    calls.fetch_add(1);
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "not now");
  }
  std::atomic<int> calls{0};
};

TEST(ShmNetworkTest, AFailedAttachKeepsThePeerOnGrpcForAWhile) {
  FailingShmPeer peer;
  std::string address;
  std::unique_ptr<grpc::Server> server = StartLocalServer(&peer, &address);
  ChannelCache channels;
  {
    // Within the back-off, every send goes over gRPC without a call (a
    // job whose peer hangs must not wait for one Attach per message).
    ShmNetwork::Options options;
    options.attach_retry_after = absl::InfiniteDuration();
    ShmNetwork a(options, &channels);
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(a.SenderTo(address, In(absl::Seconds(5))), nullptr);
    }
    EXPECT_EQ(peer.calls.load(), 1);
  }
  {
    // After it, the peer is asked again, not written off.
    ShmNetwork::Options options;
    options.attach_retry_after = absl::ZeroDuration();
    ShmNetwork a(options, &channels);
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(a.SenderTo(address, In(absl::Seconds(5))), nullptr);
    }
    EXPECT_EQ(peer.calls.load(), 4);
  }
  server->Shutdown();
}

}  // namespace
}  // namespace shardmap
