// Single-copy transfers over a shared-memory channel: the probe that
// decides whether a channel lends, the lent-slot states, and lent
// messages end to end through one channel and through two ShmNetworks.
#include "worker/transport/shm/shm_lent.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "tests/unit/shm_pair.h"
#include "worker/transport/shm/cross_memory.h"

namespace shardmap {
namespace shm_lent_testing {
namespace {

// A kernel that refuses, as one with Yama ptrace_scope 3 would.
class RefusingMemory final : public CrossMemory {
 public:
  absl::Status Read(pid_t, uint64_t, absl::Span<uint8_t>) override {
    ++reads;
    return absl::PermissionDeniedError(
        "process_vm_readv from pid 1: Operation not permitted");
  }
  int reads = 0;
};

TEST(CrossMemoryTest, ProbeReadsTheWordOrSaysWhyNot) {
  const uint64_t word = 0x1234567890abcdefull;
  const uint64_t address = reinterpret_cast<uint64_t>(&word);
  EXPECT_TRUE(
      ProbeSingleCopy(*ProcessVmReader::Get(), getpid(), address, word).ok());
  const absl::Status other =
      ProbeSingleCopy(*ProcessVmReader::Get(), getpid(), address, word + 1);
  EXPECT_EQ(other.code(), absl::StatusCode::kFailedPrecondition) << other;
  RefusingMemory refusing;
  const absl::Status refused =
      ProbeSingleCopy(refusing, getpid(), address, word);
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(refused.ToString().find("not permitted"), std::string::npos);
  EXPECT_EQ(ProbeSingleCopy(refusing, 0, address, word).code(),
            absl::StatusCode::kFailedPrecondition);  // no probe offered
  EXPECT_EQ(refusing.reads, 1);
}

TEST(ShmLentSlotsTest, PostClaimReleaseRevoke) {
  ShmLentArea area;
  std::memset(static_cast<void*>(&area), 0, sizeof(area));
  ShmLentSlots slots(&area);
  const ShmLentTicket t{3, 1};
  slots.Post(t);
  EXPECT_EQ(slots.Find(t), ShmLentSlots::Where::kPosted);
  ASSERT_TRUE(slots.Claim(3, 1));
  EXPECT_FALSE(slots.Claim(3, 1));  // once
  EXPECT_EQ(slots.Find(t), ShmLentSlots::Where::kReading);
  EXPECT_FALSE(slots.Revoke(t));  // being read: the sender must wait
  const uint32_t seen = slots.released_seq();
  slots.Release(3, 1);
  EXPECT_NE(slots.released_seq(), seen);
  EXPECT_EQ(slots.Find(t), ShmLentSlots::Where::kDone);
  // Withdrawn before the reader came: it never reads.
  const ShmLentTicket u{3, 2};
  slots.Post(u);
  EXPECT_TRUE(slots.Revoke(u));
  EXPECT_FALSE(slots.Claim(3, 2));
  EXPECT_EQ(slots.Find(u), ShmLentSlots::Where::kDone);
  // A record naming an earlier generation of a reused slot does not read.
  slots.Post(ShmLentTicket{3, 3});
  EXPECT_FALSE(slots.Claim(3, 2));
  EXPECT_FALSE(slots.Claim(kShmLentSlots, 3));  // out of range
  // Dropped unread (a finished job's message).
  slots.Release(3, 3);
  EXPECT_EQ(slots.Find(ShmLentTicket{3, 3}), ShmLentSlots::Where::kDone);
}

// Lent messages of any size pass a one-page ring; taken out of order, the
// others are copied aside and still arrive whole; Settle frees the slots.
TEST(ShmLentChannelTest, LentMessagesArriveWholeInAnyOrder) {
  Channel c(4096, /*lend=*/true);
  ASSERT_TRUE(c.sender->lends());
  const Fingerprint fp{5, "ppermute(float32[...])"};
  const std::vector<size_t> sizes = {(8 << 20) + 3, 100, 1 << 20};
  std::vector<Bytes> data;
  for (size_t i = 0; i < sizes.size(); ++i) {
    data.push_back(Pattern(sizes[i], static_cast<uint8_t>(i)));
  }
  std::vector<ShmLentTicket> tickets;
  for (size_t i = 0; i < sizes.size(); ++i) {
    ASSERT_TRUE(c.sender
                    ->Lend(Key(static_cast<uint32_t>(i)), fp, data[i],
                           In(absl::Seconds(20)), kNever, &tickets)
                    .ok());
  }
  EXPECT_EQ(tickets.size(), 2u);  // 100 bytes go through the ring
  std::thread reader([&] {
    for (size_t i : {2, 0, 1}) {
      Bytes out(sizes[i]);
      ASSERT_TRUE(c.receiver
                      ->Take(Key(static_cast<uint32_t>(i)), fp,
                             absl::MakeSpan(out), In(absl::Seconds(20)), kNever)
                      .ok());
      EXPECT_EQ(out, data[i]) << i;
    }
  });
  EXPECT_TRUE(
      c.sender->Settle(&tickets, false, In(absl::Seconds(20)), kNever).ok());
  EXPECT_TRUE(tickets.empty());
  reader.join();
  EXPECT_EQ(c.receiver->Pending(), 0u);
  // Every slot is free again: kShmLentSlots more lends all lend.
  const Bytes small = Pattern(64 << 10, 9);
  for (int i = 0; i < kShmLentSlots; ++i) {
    ASSERT_TRUE(c.sender
                    ->Lend(Key(100 + i), fp, small, In(absl::Seconds(5)),
                           kNever, &tickets)
                    .ok());
  }
  EXPECT_EQ(tickets.size(), static_cast<size_t>(kShmLentSlots));
  // None left: the next one goes through the ring, and what does not fit
  // waits in the caller's buffer (a push ticket), not copied aside.
  ASSERT_TRUE(
      c.sender
          ->Lend(Key(999), fp, small, In(absl::Seconds(5)), kNever, &tickets)
          .ok());
  ASSERT_EQ(tickets.size(), static_cast<size_t>(kShmLentSlots) + 1);
  EXPECT_EQ(tickets.back().slot, -1);
  EXPECT_GT(tickets.back().push, 0u);
  EXPECT_GT(c.sender->SpilledBytes(), 0u);
  c.receiver->ForgetJob("j");  // the job ends: its lent messages let go
  // The receiver keeps draining the ring (the spilled record and the lent
  // ones' records reach it only as it reads) until Settle returns, however
  // long that takes on a busy machine; nothing is ever sent under Key(5000).
  std::atomic<bool> settled{false};
  std::thread drain([&] {
    while (!settled) {
      Bytes out(10);
      const absl::Status s =
          c.receiver->Take(Key(5000), fp, absl::MakeSpan(out),
                           In(absl::Milliseconds(50)), kNever);
      EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
    }
  });
  const absl::Status settle =
      c.sender->Settle(&tickets, false, In(absl::Seconds(60)), kNever);
  settled = true;
  drain.join();
  EXPECT_TRUE(settle.ok()) << settle;
  EXPECT_TRUE(tickets.empty());
}

// A sender whose collective fails withdraws what it lent; the receiver
// then fails the message instead of reading freed memory. Settle is
// bounded by its deadline when nobody reads.
TEST(ShmLentChannelTest, WithdrawnAndUnreadMessagesFailClearly) {
  Channel c(4096, /*lend=*/true);
  const Fingerprint fp{6, "all_gather(float32[...])"};
  const Bytes data = Pattern(1 << 20, 1);
  std::vector<ShmLentTicket> tickets;
  ASSERT_TRUE(
      c.sender->Lend(Key(0), fp, data, In(absl::Seconds(5)), kNever, &tickets)
          .ok());
  ASSERT_TRUE(
      c.sender->Lend(Key(1), fp, data, In(absl::Seconds(5)), kNever, &tickets)
          .ok());
  const absl::Status late =
      c.sender->Settle(&tickets, false, In(absl::Milliseconds(100)), kNever);
  EXPECT_EQ(late.code(), absl::StatusCode::kDeadlineExceeded) << late;
  EXPECT_NE(late.ToString().find("unread by the receiver"), std::string::npos)
      << late;
  EXPECT_TRUE(tickets.empty());
  Bytes out(data.size());
  const absl::Status s = c.receiver->Take(Key(1), fp, absl::MakeSpan(out),
                                          In(absl::Seconds(5)), kNever);
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
  EXPECT_NE(s.ToString().find("withdrawn"), std::string::npos) << s;
  EXPECT_EQ(
      c.receiver
          ->Take(Key(0), fp, absl::MakeSpan(out), In(absl::Seconds(5)), kNever)
          .code(),
      absl::StatusCode::kAborted);  // stashed on the way, withdrawn
  // Abandoned at once.
  ASSERT_TRUE(
      c.sender->Lend(Key(2), fp, data, In(absl::Seconds(5)), kNever, &tickets)
          .ok());
  EXPECT_TRUE(
      c.sender->Settle(&tickets, true, In(absl::Seconds(20)), kNever).ok());
  EXPECT_EQ(
      c.receiver
          ->Take(Key(2), fp, absl::MakeSpan(out), In(absl::Seconds(5)), kNever)
          .code(),
      absl::StatusCode::kAborted);
}

// Through ShmPeer.Attach: with single copy on at both ends, a peer that
// may read this process's memory gets lent messages; one whose kernel
// refuses, or that has it off (the default), keeps the channel on the
// ring, and the same calls still deliver.
TEST(ShmLentNetworkTest, LendsOnlyWhenThePeerCanRead) {
  RefusingMemory refusing;
  for (int mode : {0, 1, 2}) {  // allowed, refused, off at the receiver
    const bool allowed = mode == 0;
    ShmNetwork::Options b_options;
    b_options.single_copy = mode != 2;
    if (mode == 1) b_options.memory = &refusing;
    Pair p(b_options, /*single_copy=*/true);
    std::shared_ptr<ShmSender> sender =
        p.a->SenderTo(p.b_address, In(absl::Seconds(5)));
    ASSERT_NE(sender, nullptr);
    EXPECT_EQ(sender->lends(), allowed);
    std::shared_ptr<ShmReceiver> receiver = p.b->ReceiverFrom("a:1");
    ASSERT_NE(receiver, nullptr);
    const Fingerprint fp{8, "all_to_all"};
    const Bytes data = Pattern(3 << 20, allowed ? 1 : 2);
    std::vector<ShmLentTicket> tickets;
    ASSERT_TRUE(
        sender->Lend(Key(0), fp, data, In(absl::Seconds(5)), kNever, &tickets)
            .ok());
    // Lent by address, or pushed into the ring from `data` as it drains.
    ASSERT_EQ(tickets.size(), 1u);
    EXPECT_EQ(tickets[0].slot >= 0, allowed);
    Bytes out(data.size());
    ASSERT_TRUE(receiver
                    ->Take(Key(0), fp, absl::MakeSpan(out),
                           In(absl::Seconds(10)), kNever)
                    .ok());
    EXPECT_EQ(out, data);
    EXPECT_TRUE(
        sender->Settle(&tickets, false, In(absl::Seconds(10)), kNever).ok());
  }
  EXPECT_EQ(refusing.reads, 1);  // probed once, at Attach
  // Off at the sender (the default): it offers nothing to probe.
  ShmNetwork::Options b_options;
  b_options.single_copy = true;
  b_options.memory = &refusing;
  Pair p(b_options);
  std::shared_ptr<ShmSender> sender =
      p.a->SenderTo(p.b_address, In(absl::Seconds(5)));
  ASSERT_NE(sender, nullptr);
  EXPECT_FALSE(sender->lends());
  EXPECT_EQ(refusing.reads, 1);
}

}  // namespace
}  // namespace shm_lent_testing
}  // namespace shardmap
