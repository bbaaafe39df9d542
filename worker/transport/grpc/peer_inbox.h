// The receiving half of the peer transport: frames that arrived from other
// workers, held until the job's collective asks for them.
//
// Streams deliver frames (never blocking); Take waits for one whole
// message, checks its fingerprint and size, and copies it out: the only
// copy of a payload between the socket and its destination (TakeChunks
// lets the caller read it where it lies instead). A stream
// that breaks marks its sender lost, so a Take waiting on that sender fails
// at once with UNAVAILABLE instead of waiting out its timeout.
//
// Senders are a process at an address (address, incarnation): a Take that
// names the incarnation it expects is failed only by the loss of that
// process's streams, never by those of an earlier process at the same
// address (a restarted peer), and waits for a process that has not opened
// its stream yet.
//
// Thread-safe.
#ifndef SHARDMAP_WORKER_PEER_INBOX_H_
#define SHARDMAP_WORKER_PEER_INBOX_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "worker/transport/grpc/peer_frame.h"
#include "worker/transport/peer_transport.h"

namespace shardmap {

class PeerInbox {
 public:
  // What a Take waits for.
  struct Want {
    std::string job_id;
    int64_t from_device = 0;
    std::string from_address;       // the worker that device runs on
    uint64_t from_incarnation = 0;  // its process; 0: whichever
    uint64_t seq = 0;
    uint32_t step = 0;
    const Fingerprint* fingerprint = nullptr;  // ours; Not owned.
  };

  // Stores a frame, keeping its payload's slices (no copy). INVALID_ARGUMENT
  // for a frame that contradicts earlier fragments of its message (the
  // stream is then closed by its reactor).
  absl::Status Deliver(DecodedFrame&& frame);
  // A stream from process `incarnation` at `address` opened or ended (each
  // stream reports each at most once). A sender with no open stream left
  // is lost.
  void StreamOpened(const std::string& address, uint64_t incarnation);
  void StreamLost(const std::string& address, uint64_t incarnation);

  // Waits for the message, at most until `deadline`, checking `aborted`
  // (returns non-OK to stop waiting) every few milliseconds. Errors:
  // DEADLINE_EXCEEDED, UNAVAILABLE (sender lost), INVALID_ARGUMENT
  // (fingerprint or size mismatch; both fingerprints in the message), or
  // what `aborted` returned.
  absl::Status Take(const Want& want, absl::Span<uint8_t> out,
                    absl::Time deadline,
                    const std::function<absl::Status()>& aborted);
  // As Take of a message of `size` bytes, handing the payload's slices to
  // `consume` in order (PeerTransport::RecvChunks) instead of copying them.
  absl::Status TakeChunks(const Want& want, size_t size,
                          const PeerTransport::ChunkConsumer& consume,
                          absl::Time deadline,
                          const std::function<absl::Status()>& aborted);

  // Drops what is left of a job and ignores its late frames.
  void ForgetJob(const std::string& job_id);

 private:
  // Take's waiting half: the message's fragments, removed from the inbox,
  // once all `size` bytes arrived.
  absl::StatusOr<std::vector<PeerPayload>> Wait(
      const Want& want, size_t size, absl::Time deadline,
      const std::function<absl::Status()>& aborted);
  using Key = std::tuple<std::string, int64_t, uint64_t, uint32_t>;
  struct Message {
    uint64_t total = 0;
    uint64_t received = 0;
    uint64_t fingerprint = 0;
    std::string fingerprint_text;
    // Fragments in order; they cover [0, received).
    std::vector<PeerPayload> fragments;
  };

  absl::Mutex mu_;
  std::map<Key, Message> messages_ ABSL_GUARDED_BY(mu_);
  // Whether the sender of `want` is lost.
  bool LostLocked(const Want& want) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  using Sender = std::pair<std::string, uint64_t>;  // address, incarnation
  std::map<Sender, int> open_streams_ ABSL_GUARDED_BY(mu_);
  std::set<Sender> lost_ ABSL_GUARDED_BY(mu_);
  // Recently finished jobs, oldest first, so late frames are dropped.
  std::deque<std::string> finished_order_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> finished_ ABSL_GUARDED_BY(mu_);
};

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_PEER_INBOX_H_
