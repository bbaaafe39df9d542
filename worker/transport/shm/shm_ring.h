// One direction of a shared-memory channel between two processes on one
// host (or two threads of one process): a byte ring in a POSIX shared
// memory object, with one writer and one reader.
//
// The writer creates the object under /dev/shm with an unpredictable name
// and mode 0600 (Create), tells the reader the name and the nonce by some
// other path, the reader maps it (Attach, which checks owner, size, magic
// and nonce), and either side unlinks the name once both have it mapped.
//
// Positions are 64-bit counters of bytes ever written and read; the ring
// holds write_pos - read_pos bytes. Each side publishes its position with
// a sequentially consistent store and wakes the other through a futex
// only when the other announced that it sleeps, so a busy stream costs no
// system calls. Every wait is a futex wait of at most kWaitSlice, after
// which the caller's deadline, its abort check and the other side's
// liveness are checked again.
//
// Liveness: each side holds an open-file-description lock on its own byte
// of the object (writer byte 0, reader byte 1) for as long as it has it
// mapped; the kernel drops it when the process dies, however it dies, so
// PeerAlive() is exact and needs no pid (which another pid namespace would
// not see).
//
// Thread-compatible per side: one thread writes at a time and one thread
// reads at a time (ShmSender and ShmReceiver serialize their callers).
#ifndef SHARDMAP_WORKER_SHM_RING_H_
#define SHARDMAP_WORKER_SHM_RING_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker/transport/shm/shm_lent.h"

namespace shardmap {

class ShmRing {
 public:
  // Longest single futex wait before checks are repeated.
  static constexpr absl::Duration kWaitSlice = absl::Milliseconds(20);
  // How long Wait polls (yielding the core) before it sleeps on the futex.
  static constexpr absl::Duration kSpin = absl::Microseconds(50);

  // Creates and maps a new object of `capacity` bytes of ring (a multiple
  // of 4096, at least 4096) as its writer.
  static absl::StatusOr<std::unique_ptr<ShmRing>> Create(size_t capacity);
  // Maps the object `name` made by Create as its reader; fails unless it is
  // owned by this user, mode 0600, of the right size, and carries `nonce`.
  static absl::StatusOr<std::unique_ptr<ShmRing>> Attach(
      const std::string& name, uint64_t nonce, size_t capacity);
  ~ShmRing();  // unmaps, closes (releasing the liveness lock)
  ShmRing(const ShmRing&) = delete;
  ShmRing& operator=(const ShmRing&) = delete;

  const std::string& name() const { return name_; }
  uint64_t nonce() const { return nonce_; }
  size_t capacity() const { return capacity_; }
  bool is_writer() const { return writer_; }
  // Where the creator keeps the nonce in its own memory: a word the reader
  // knows the value of, to probe single-copy reads (ProbeSingleCopy).
  const uint64_t* nonce_address() const { return &nonce_; }
  // The lent-buffer slots in the object's header page (shm_lent.h).
  ShmLentArea* lent_area() const;

  // Removes the name (the mapping stays). Idempotent.
  void Unlink();

  // Whether the other side still has the object mapped. Before the reader
  // attached, the writer sees no reader. A system call (about half a
  // microsecond).
  bool PeerAlive() const;
  // As PeerAlive, but asks the kernel at most once per kLivenessPeriod and
  // otherwise answers what it found last: for paths taken once per message,
  // where a peer that died is to be noticed soon, not at once. Thread-safe.
  bool PeerAliveLately() const;
  static constexpr absl::Duration kLivenessPeriod = absl::Milliseconds(1);

  // Writer: copies up to `n` bytes (fewer if the ring has less room) in
  // and publishes them; returns how many. Never blocks.
  size_t Write(const uint8_t* data, size_t n);
  // Reader: copies up to `n` available bytes out (to nowhere if `out` is
  // null) and frees their room; returns how many. Never blocks.
  size_t Read(uint8_t* out, size_t n);
  size_t Readable() const;
  size_t Writable() const;

  // Waits until Writable() (writer) or Readable() (reader) is nonzero.
  // Returns OK then, else DEADLINE_EXCEEDED at `deadline`, UNAVAILABLE if
  // the other side is gone (for the reader: gone and nothing left to
  // read), or the first non-OK status of `aborted`, polled every slice.
  // `idle`, if set, is called once per slice (before sleeping) and may end
  // the wait with its own status by returning non-OK.
  absl::Status Wait(absl::Time deadline,
                    const std::function<absl::Status()>& aborted,
                    const std::function<absl::Status()>& idle = nullptr);

  // The reader announces that a receiver is draining the ring right now;
  // a writer that finds the ring full waits for room only then.
  void SetReaderActive(bool active);
  bool ReaderActive() const;

 private:
  struct Header;
  ShmRing(std::string name, int fd, void* base, size_t mapped, size_t capacity,
          uint64_t nonce, bool writer);

  const std::string name_;
  const int fd_;
  void* const base_;
  const size_t mapped_;
  const size_t capacity_;
  const uint64_t nonce_;
  const bool writer_;
  Header* const header_;
  uint8_t* const data_;
  bool unlinked_ = false;
  // PeerAliveLately's last answer, and when to ask again.
  mutable std::atomic<bool> peer_seen_alive_{true};
  mutable std::atomic<int64_t> next_liveness_check_ns_{0};
};

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_SHM_RING_H_
