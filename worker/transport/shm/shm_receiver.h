// The reading end of one shared-memory channel, shared by every job.
//
// Messages leave the ring in the order they were sent, but collectives may
// ask for them in another order (all_to_all, multi-step algorithms, and a
// peer already in the next job). Take therefore works like PeerInbox: the
// thread that holds the "pump" reads records off the ring; the record it
// waits for streams straight into its output buffer, any other is set
// aside (stashed) for the Take that will ask for it; threads that do not
// hold the pump wait for it to stash their message or to pass the pump on.
// The fingerprint and size checks, and their messages, are PeerInbox's.
//
// A lent record (shm_lent.h) carries the payload's address in the sending
// process instead of the payload: the pump copies it from there with
// `memory` straight into the output (or the stash) and releases it.
//
// Thread-safe.
#ifndef SHARDMAP_WORKER_SHM_RECEIVER_H_
#define SHARDMAP_WORKER_SHM_RECEIVER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "worker/transport/peer_transport.h"
#include "worker/transport/shm/cross_memory.h"
#include "worker/transport/shm/shm_lent.h"
#include "worker/transport/shm/shm_record.h"
#include "worker/transport/shm/shm_ring.h"

namespace shardmap {

class ShmReceiver {
 public:
  // `ring` must be the reading end; `peer` names the sender in messages.
  // `memory` (not owned; may be null: the sender never lends) reads lent
  // payloads from process `sender_pid`.
  ShmReceiver(std::unique_ptr<ShmRing> ring, std::string peer,
              CrossMemory* memory = nullptr, pid_t sender_pid = 0);
  ShmReceiver(const ShmReceiver&) = delete;
  ShmReceiver& operator=(const ShmReceiver&) = delete;

  const std::string& peer() const { return peer_; }

  // Waits for the message `key` and copies its payload into `out`. Errors:
  // INVALID_ARGUMENT on a fingerprint mismatch (both texts) or a size
  // mismatch; UNAVAILABLE when the sender is gone and left nothing more,
  // or its lent payload could not be read; ABORTED when the sender
  // withdrew its lent payload (its side of the collective failed);
  // DEADLINE_EXCEEDED at `deadline`; `aborted`'s status. `idle`, if set,
  // is called every few milliseconds while waiting (not while streaming a
  // message) and a non-OK status ends the wait with it: the routed
  // transport looks for the message on its other path there.
  absl::Status Take(const ShmMessageKey& key, const Fingerprint& expected,
                    absl::Span<uint8_t> out, absl::Time deadline,
                    const std::function<absl::Status()>& aborted,
                    const std::function<absl::Status()>& idle = nullptr);

  // Drops the job's stashed messages and ignores its later ones.
  void ForgetJob(const std::string& job_id);

  // Whether the sender still has the channel mapped.
  bool SenderAlive() const { return ring_->PeerAlive(); }
  // Stashed messages, plus one if the ring holds unread bytes.
  size_t Pending();

 private:
  struct Stashed {
    uint64_t fingerprint = 0;
    std::string fingerprint_text;
    std::string data;
    bool complete = false;
    absl::Status error;  // a lent payload that could not be had
  };
  // Where the record being read is, so a reader interrupted in the middle
  // leaves the next one able to go on.
  struct Cursor {
    enum Stage { kHead, kNames, kRef, kData } stage = kHead;
    ShmRecordHead head;
    size_t head_got = 0;
    ShmLentRef ref;  // of a lent record
    size_t ref_got = 0;
    std::string names;  // job id + fingerprint text
    size_t names_got = 0;
    uint64_t data_got = 0;
    enum Sink { kOut, kStash, kDiscard } sink = kDiscard;
    ShmMessageKey key;
  };

  // Reads records (holding the pump) until `key` arrived in `out` or was
  // stashed (*done set), or an error.
  absl::Status Pump(const ShmMessageKey& key, const Fingerprint& expected,
                    absl::Span<uint8_t> out, absl::Time deadline,
                    const std::function<absl::Status()>& aborted,
                    const std::function<absl::Status()>& idle, bool* done);
  // Reads up to `n` bytes into `dst` (null: drop), waiting for the ring.
  absl::Status ReadFully(uint8_t* dst, size_t n, size_t* got,
                         absl::Time deadline,
                         const std::function<absl::Status()>& aborted,
                         const std::function<absl::Status()>& idle);
  // Copies the lent payload of the record at the cursor into `dst` (null:
  // drops it) and releases it.
  absl::Status CopyLent(uint8_t* dst);
  // Checks a complete stashed message against the Take and hands it out.
  absl::Status Deliver(std::map<ShmMessageKey, Stashed>::iterator it,
                       const ShmMessageKey& key, const Fingerprint& expected,
                       absl::Span<uint8_t> out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status MismatchLocked(const ShmMessageKey& key,
                              const Fingerprint& expected)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::unique_ptr<ShmRing> ring_;
  const std::string peer_;
  CrossMemory* const memory_;  // Not owned; may be null.
  const pid_t sender_pid_;
  ShmLentSlots slots_;
  Cursor cursor_;  // owned by the pump holder
  absl::Mutex mu_;
  absl::CondVar changed_;  // the pump was released or a message stashed
  bool pumping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status broken_ ABSL_GUARDED_BY(mu_);  // a malformed record
  std::map<ShmMessageKey, Stashed> stash_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> finished_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> finished_order_ ABSL_GUARDED_BY(mu_);
};

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_SHM_RECEIVER_H_
