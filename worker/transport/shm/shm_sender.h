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

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "worker/transport/peer_transport.h"
#include "worker/transport/shm/shm_record.h"
#include "worker/transport/shm/shm_ring.h"

namespace shardmap {

class ShmSender {
 public:
  struct Options {
    std::string peer;  // names the receiver in messages, e.g. "worker A"
    size_t max_spill_bytes = size_t{1} << 30;
  };
  // `ring` must be the writing end.
  ShmSender(std::unique_ptr<ShmRing> ring, Options options);
  ~ShmSender();  // stops the pusher; spilled bytes are dropped
  ShmSender(const ShmSender&) = delete;
  ShmSender& operator=(const ShmSender&) = delete;

  const std::string& peer() const { return options_.peer; }

  // Errors: UNAVAILABLE once the receiver is gone (sticky), or what the
  // wait for room ended with: DEADLINE_EXCEEDED or `aborted`'s status.
  absl::Status Send(const ShmMessageKey& key, const Fingerprint& fingerprint,
                    absl::Span<const uint8_t> data, absl::Time deadline,
                    const std::function<absl::Status()>& aborted);

  // False once the channel failed or the receiver unmapped it.
  bool Usable();
  // Bytes set aside and not yet in the ring.
  size_t SpilledBytes();

 private:
  void PushSpilled();
  // Copies what is left of `parts` (from `offset`) into the spill.
  void SpillLocked(const absl::Span<const uint8_t> (&parts)[2], size_t offset)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::unique_ptr<ShmRing> ring_;
  const Options options_;
  std::atomic<bool> stop_{false};
  absl::Mutex mu_;
  // Holds the ring's write side: a Send writing in place, or the pusher.
  std::deque<std::string> spill_ ABSL_GUARDED_BY(mu_);
  size_t spill_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status failed_ ABSL_GUARDED_BY(mu_);
  std::thread pusher_ ABSL_GUARDED_BY(mu_);
};

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_SHM_SENDER_H_
