#include "worker/transport/shm/shm_lent.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
#include <ctime>

namespace shardmap {
namespace {

enum State : uint32_t { kFree = 0, kPosted = 1, kReading = 2, kRevoked = 3 };

constexpr uint32_t Word(uint32_t generation, State state) {
  return (generation << 2) | state;
}

}  // namespace

void ShmLentSlots::Post(const ShmLentTicket& t) {
  area_->slots[t.slot].store(Word(t.generation, kPosted));
}

bool ShmLentSlots::Claim(uint32_t slot, uint32_t generation) {
  if (slot >= kShmLentSlots) return false;
  uint32_t expected = Word(generation, kPosted);
  return area_->slots[slot].compare_exchange_strong(expected,
                                                    Word(generation, kReading));
}

void ShmLentSlots::Release(uint32_t slot, uint32_t generation) {
  if (slot >= kShmLentSlots) return;
  for (State from : {kReading, kPosted}) {
    uint32_t expected = Word(generation, from);
    if (area_->slots[slot].compare_exchange_strong(expected,
                                                   Word(generation, kFree))) {
      break;
    }
  }
  area_->released_seq.fetch_add(1);
  if (area_->sender_sleeping.load() > 0) {
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&area_->released_seq),
            FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
  }
}

ShmLentSlots::Where ShmLentSlots::Find(const ShmLentTicket& t) const {
  const uint32_t word = area_->slots[t.slot].load();
  if (word == Word(t.generation, kPosted)) return Where::kPosted;
  if (word == Word(t.generation, kReading)) return Where::kReading;
  return Where::kDone;  // released, or revoked by us
}

bool ShmLentSlots::Revoke(const ShmLentTicket& t) {
  uint32_t expected = Word(t.generation, kPosted);
  if (area_->slots[t.slot].compare_exchange_strong(
          expected, Word(t.generation, kRevoked))) {
    return true;
  }
  return expected != Word(t.generation, kReading);
}

// As ShmRing::Wait: announce, check again, sleep on the sequence word.
void ShmLentSlots::WaitForRelease(uint32_t seen, absl::Duration timeout) {
  area_->sender_sleeping.fetch_add(1);
  if (area_->released_seq.load() == seen) {
    struct timespec ts = absl::ToTimespec(timeout);
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&area_->released_seq),
            FUTEX_WAIT, seen, &ts, nullptr, 0);
  }
  area_->sender_sleeping.fetch_sub(1);
}

}  // namespace shardmap
