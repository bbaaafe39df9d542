// The writing end of one shared-memory channel (this process -> one peer
// process, or one device -> another in tests), shared by every job.
//
// Send copies a message into the ring as room appears, while the reader
// copies it out the other side, so a message of any size streams through
// a ring of a few MiB. Send must not wait for the receiver to ask for the
// message, though: collectives send before they receive (recursive
// doubling, direct exchange, ppermute), and two peers each blocked writing
// to the other would deadlock. So when the ring is full and no receiver is
// draining it at that moment, Send copies the rest of the message aside
// ("spills") and returns; a background thread pushes spilled bytes into
// the ring, in order, as the reader frees room. A receiver that is
// draining makes Send wait for room instead (bounded by the caller's
// deadline and abort check), which keeps the common streaming path free
// of extra copies. Spilled bytes are capped (Options::max_spill_bytes);
// past the cap Send waits for the pusher, bounded as above.
//
// A message interrupted by the caller's deadline or abort after its first
// byte is spilled whole, so the ring never holds half a message; the
// receiver discards it with its job.
//
// Lend is Send for a caller that keeps its buffer unchanged until Settle:
// when the receiver can read this process's memory (Options::lend) it
// announces a large message by address (shm_lent.h) and the receiver
// copies it straight into its destination, one copy and no ring. Else
// what does not fit in the ring is not copied aside at once but pushed
// into it later straight from the caller's buffer ("borrowed"); what is
// still borrowed when the caller settles is copied aside then.
//
// Thread-safe.
#ifndef SHARDMAP_WORKER_SHM_SENDER_H_
#define SHARDMAP_WORKER_SHM_SENDER_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "worker/transport/peer_transport.h"
#include "worker/transport/shm/shm_lent.h"
#include "worker/transport/shm/shm_record.h"
#include "worker/transport/shm/shm_ring.h"

namespace shardmap {

class ShmSender {
 public:
  struct Options {
    std::string peer;  // names the receiver in messages, e.g. "worker A"
    size_t max_spill_bytes = size_t{1} << 30;
    // The receiver reads lent buffers (it probed single-copy reads).
    bool lend = false;
    // Smaller messages are copied into the ring even then.
    size_t min_lent_bytes = size_t{64} << 10;
  };
  // `ring` must be the writing end.
  ShmSender(std::unique_ptr<ShmRing> ring, Options options);
  ~ShmSender();  // stops the pusher; spilled bytes are dropped
  ShmSender(const ShmSender&) = delete;
  ShmSender& operator=(const ShmSender&) = delete;

  const std::string& peer() const { return options_.peer; }
  // Whether Lend may lend (the receiver reads this process's memory).
  bool lends() const { return options_.lend; }

  // Errors: UNAVAILABLE once the receiver is gone (sticky; noticed within
  // ShmRing::kLivenessPeriod, so a message sent in that time is lost with
  // the receiver), or what the wait for room ended with:
  // DEADLINE_EXCEEDED or `aborted`'s status.
  absl::Status Send(const ShmMessageKey& key, const Fingerprint& fingerprint,
                    absl::Span<const uint8_t> data, absl::Time deadline,
                    const std::function<absl::Status()>& aborted);

  // As Send, but a message of at least min_lent_bytes, when the channel
  // lends and one of its kShmLentSlots slots is free, is lent; any other
  // is borrowed where it does not fit in the ring. `data` must stay
  // unchanged until Settle has released the tickets appended to *tickets
  // (also when Lend fails: the record may be in the ring).
  absl::Status Lend(const ShmMessageKey& key, const Fingerprint& fingerprint,
                    absl::Span<const uint8_t> data, absl::Time deadline,
                    const std::function<absl::Status()>& aborted,
                    std::vector<ShmLentTicket>* tickets);
  // Copies aside what is still borrowed of *tickets' buffers, waits until
  // the receiver is done with every lent one (then clears *tickets), and
  // returns OK. With `abandon` (the caller failed) or past `deadline` or
  // once `aborted` fails, it withdraws the lent buffers not being read,
  // waits (bounded) for those being read, and returns that status (OK with
  // abandon). UNAVAILABLE if the receiver is gone.
  absl::Status Settle(std::vector<ShmLentTicket>* tickets, bool abandon,
                      absl::Time deadline,
                      const std::function<absl::Status()>& aborted);

  // False once the channel failed or the receiver unmapped it (noticed
  // within ShmRing::kLivenessPeriod). Cheap: no system call per call.
  bool Usable();
  // Bytes set aside and not yet in the ring.
  size_t SpilledBytes();

 private:
  // Writes one record (or spills it) as Send documents. With `borrow`
  // (Lend) the payload is borrowed, not copied, when it must wait: a
  // ticket for it is appended there.
  absl::Status WriteRecord(const std::string& head,
                           absl::Span<const uint8_t> payload,
                           absl::Time deadline,
                           const std::function<absl::Status()>& aborted,
                           std::vector<ShmLentTicket>* borrow = nullptr);
  void PushSpilled();
  // Sets what is left of `parts` (from `offset`) aside: copied, or the
  // payload borrowed (see WriteRecord).
  void SpillLocked(const absl::Span<const uint8_t> (&parts)[2], size_t offset,
                   std::vector<ShmLentTicket>* borrow)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Settle's part for borrowed buffers (`pushes`: their numbers): copies
  // what is left of them aside. UNAVAILABLE if the channel failed, unless
  // `abandon`.
  absl::Status SettlePushes(const std::vector<uint64_t>& pushes, bool abandon);
  bool AnyBorrowedLocked(const std::vector<uint64_t>& pushes) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Bytes waiting for room in the ring: spilled (owned) or borrowed from a
  // Lend's caller until Settle (push names the ticket).
  struct Pending {
    std::string owned;
    absl::Span<const uint8_t> borrowed;
    uint64_t push = 0;
    bool is_borrowed() const { return push != 0; }
    const uint8_t* data() const {
      return is_borrowed() ? borrowed.data()
                           : reinterpret_cast<const uint8_t*>(owned.data());
    }
    size_t size() const {
      return is_borrowed() ? borrowed.size() : owned.size();
    }
  };

  const std::unique_ptr<ShmRing> ring_;
  const Options options_;
  std::atomic<bool> stop_{false};
  absl::Mutex mu_;
  // Holds the ring's write side: a Send writing in place, or the pusher.
  std::deque<Pending> spill_ ABSL_GUARDED_BY(mu_);
  size_t spill_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // Bytes of spill_.front() in the ring; whether the pusher is copying from
  // a borrowed buffer right now (outside mu_); the last push number.
  size_t front_done_ ABSL_GUARDED_BY(mu_) = 0;
  bool pushing_borrowed_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t pushes_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status failed_ ABSL_GUARDED_BY(mu_);
  std::thread pusher_ ABSL_GUARDED_BY(mu_);
  ShmLentSlots slots_;
  std::vector<int> free_slots_ ABSL_GUARDED_BY(mu_);
  std::vector<uint32_t> generations_ ABSL_GUARDED_BY(mu_);  // last posted
};

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_SHM_SENDER_H_
