// Buffers lent by a shared-memory channel's sender to its reader: the
// sender announces a message by its address instead of copying it into
// the ring (a "lent" record), and the reader copies it straight out of the
// sender's memory (CrossMemory) into its destination. One copy instead of
// two, and a message of any size passes a ring of a few KiB.
//
// The sender must keep the buffer unchanged until the reader is done with
// it, so each lent buffer has a slot in the channel's shared header that
// says where it is:
//
//   sender Post        reader Claim             reader Release
//   ----------> POSTED -----------> READING -----------------> DONE
//                  |  sender Revoke (its collective failed)
//                  +-------------> REVOKED   (the reader then fails the
//                                             message, never reads it)
//                  |  reader Release (a message of a finished job)
//                  +-------------> DONE
//
// A slot's word is (generation << 2) | state, so a record that names an
// earlier generation of a reused slot finds it taken and does not read.
// The reader bumps a sequence word and wakes the sender (a futex, only
// when it announced that it sleeps) whenever a slot is released.
//
// Thread-safe: each method is one atomic step on one slot.
#ifndef SHARDMAP_WORKER_TRANSPORT_SHM_SHM_LENT_H_
#define SHARDMAP_WORKER_TRANSPORT_SHM_SHM_LENT_H_

#include <atomic>
#include <cstdint>

#include "absl/time/time.h"

namespace shardmap {

constexpr int kShmLentSlots = 256;

// The part of a channel's header page that holds the slots. Zero-filled
// means every slot free.
struct ShmLentArea {
  std::atomic<uint32_t> released_seq;  // bumped after every Release
  std::atomic<uint32_t> sender_sleeping;
  std::atomic<uint32_t> slots[kShmLentSlots];
};

// Follows the payload-less head of a lent record in the ring.
struct ShmLentRef {
  uint64_t address = 0;  // of the payload, in the sender
  uint32_t slot = 0;
  uint32_t generation = 0;
};

// One lent buffer, as its sender tracks it: a slot (the reader copies
// from the buffer), or a push (slot -1: the sender's pusher copies what
// did not fit in the ring from the buffer, ShmSender::Lend).
struct ShmLentTicket {
  int slot = -1;
  uint32_t generation = 0;
  uint64_t push = 0;  // a push's number, from 1
};

class ShmLentSlots {
 public:
  enum class Where { kDone, kPosted, kReading };

  explicit ShmLentSlots(ShmLentArea* area) : area_(area) {}

  // Sender: the slot's buffer is announced (the slot must be free).
  void Post(const ShmLentTicket& t);
  // Reader: takes the buffer for copying; false if the sender revoked it
  // (or the slot moved on to a later generation).
  bool Claim(uint32_t slot, uint32_t generation);
  // Reader: done with the buffer (after Claim), or drops an unclaimed one.
  void Release(uint32_t slot, uint32_t generation);
  // Sender: where the buffer is.
  Where Find(const ShmLentTicket& t) const;
  // Sender: withdraws a posted buffer; true if the reader will not touch
  // it any more (withdrawn now, or done already), false while it reads.
  bool Revoke(const ShmLentTicket& t);

  // Sender: waits (at most `timeout`) for a Release after `seen`, a value
  // of released_seq() read before the last Find.
  uint32_t released_seq() const { return area_->released_seq.load(); }
  void WaitForRelease(uint32_t seen, absl::Duration timeout);

 private:
  ShmLentArea* const area_;  // Not owned.
};

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_TRANSPORT_SHM_SHM_LENT_H_
