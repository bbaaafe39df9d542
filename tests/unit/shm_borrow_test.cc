// Tests of borrowed pushes (ShmSender::Lend on a channel that does not lend
// by address): what does not fit in the ring waits in the caller's buffer
// and is pushed from there as the receiver drains the ring; Settle copies
// what is still waiting aside, so the caller may reuse its buffer at once
// while the receiver still gets each message as it was when lent.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "tests/unit/shm_pair.h"
#include "worker/transport/shm/shm_lent.h"

namespace shardmap {
namespace shm_lent_testing {
namespace {

const Fingerprint kFp{11, "ppermute(float32[...])"};

absl::Status Take(Channel& c, uint32_t step, Bytes* out) {
  return c.receiver->Take(Key(step), kFp, absl::MakeSpan(*out),
                          In(absl::Seconds(30)), kNever);
}

// A message larger than the ring, lent while nobody reads: the rest is
// borrowed (one push ticket, no copy aside) and reaches the receiver from
// the caller's buffer; a small one fits and needs no ticket.
TEST(ShmBorrowTest, TheBorrowedRestIsPushedFromTheCallersBuffer) {
  Channel c(64 << 10);
  ASSERT_FALSE(c.sender->lends());
  const Bytes big = Pattern(1 << 20, 1);
  const Bytes small = Pattern(100, 2);
  std::vector<ShmLentTicket> tickets;
  ASSERT_TRUE(
      c.sender->Lend(Key(0), kFp, small, In(absl::Seconds(5)), kNever, &tickets)
          .ok());
  EXPECT_TRUE(tickets.empty());
  ASSERT_TRUE(
      c.sender->Lend(Key(1), kFp, big, In(absl::Seconds(5)), kNever, &tickets)
          .ok());
  ASSERT_EQ(tickets.size(), 1u);
  EXPECT_EQ(tickets[0].slot, -1);
  EXPECT_GT(tickets[0].push, 0u);
  EXPECT_GT(c.sender->SpilledBytes(), 0u);

  Bytes got_big(big.size()), got_small(small.size());
  // Out of order: the small one is stashed.
  ASSERT_TRUE(Take(c, 1, &got_big).ok());
  ASSERT_TRUE(Take(c, 0, &got_small).ok());
  EXPECT_EQ(c.sender->SpilledBytes(), 0u);
  EXPECT_TRUE(
      c.sender->Settle(&tickets, false, In(absl::Seconds(30)), kNever).ok());
  EXPECT_TRUE(tickets.empty());
  EXPECT_EQ(got_big, big);
  EXPECT_EQ(got_small, small);
}

// Settled (or abandoned: the caller's collective failed) while nobody
// reads: Settle returns at once, the caller overwrites its buffers, and
// the receiver still gets each message as it was lent (the rest was
// copied aside), behind a copied Send that came first.
TEST(ShmBorrowTest, SettleCopiesTheBorrowedRestAside) {
  Channel c(64 << 10);
  const Bytes copied = Pattern(300 << 10, 3);
  Bytes lent_a = Pattern(1 << 20, 4);
  Bytes lent_b = Pattern((512 << 10) + 7, 5);
  const Bytes want_a = lent_a, want_b = lent_b;
  ASSERT_TRUE(
      c.sender->Send(Key(0), kFp, copied, In(absl::Seconds(5)), kNever).ok());
  std::vector<ShmLentTicket> tickets_a, tickets_b;
  ASSERT_TRUE(
      c.sender
          ->Lend(Key(1), kFp, lent_a, In(absl::Seconds(5)), kNever, &tickets_a)
          .ok());
  ASSERT_EQ(tickets_a.size(), 1u);  // all of it: behind the spilled Send
  ASSERT_TRUE(
      c.sender
          ->Lend(Key(2), kFp, lent_b, In(absl::Seconds(5)), kNever, &tickets_b)
          .ok());
  ASSERT_EQ(tickets_b.size(), 1u);

  EXPECT_TRUE(
      c.sender->Settle(&tickets_a, true, In(absl::Seconds(30)), kNever).ok());
  EXPECT_TRUE(tickets_a.empty());
  EXPECT_TRUE(
      c.sender->Settle(&tickets_b, false, In(absl::Seconds(30)), kNever).ok());
  EXPECT_TRUE(tickets_b.empty());
  std::fill(lent_a.begin(), lent_a.end(), 0xee);
  std::fill(lent_b.begin(), lent_b.end(), 0xdd);

  Bytes got_b(want_b.size()), got_a(want_a.size()), got_c(copied.size());
  ASSERT_TRUE(Take(c, 2, &got_b).ok());
  ASSERT_TRUE(Take(c, 1, &got_a).ok());
  ASSERT_TRUE(Take(c, 0, &got_c).ok());
  EXPECT_EQ(got_a, want_a);
  EXPECT_EQ(got_b, want_b);
  EXPECT_EQ(got_c, copied);
}

}  // namespace
}  // namespace shm_lent_testing
}  // namespace shardmap
