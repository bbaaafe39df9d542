// How collective algorithms move bytes between the devices of one job.
//
// A PeerTransport is scoped to one device of one running job: it knows the
// job id, which device it speaks for, the job's deadline, and whether the
// job has been aborted. Algorithms address peers by device id and tag each
// message with the collective's sequence number, a step number and the
// collective's fingerprint; a receiver whose own fingerprint differs fails
// with both in the message instead of combining mismatched data.
//
// Implementations: InMemoryPeerTransport (tests: devices are threads) and
// GrpcPeerTransport (one long-lived stream per worker pair).
//
// Thread-safe: Send and Recv may be called concurrently, e.g. from a
// sending and a receiving thread of one algorithm.
#ifndef SHARDMAP_WORKER_PEER_TRANSPORT_H_
#define SHARDMAP_WORKER_PEER_TRANSPORT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"

namespace shardmap {

// What a collective call is: op, axes, shape and dtype, e.g.
// "psum(axes=('x',), float32[4,4])". Every participant of one collective
// computes the same fingerprint; the sender is carried separately.
struct Fingerprint {
  uint64_t hash = 0;
  std::string text;
};

// What every receiving path (PeerInbox, ShmReceiver) reports when device
// `from` called another collective (`theirs`) as number `seq`...
inline absl::Status CollectiveMismatchError(const Fingerprint& ours,
                                            int64_t from,
                                            const std::string& theirs,
                                            uint64_t seq) {
  return absl::InvalidArgumentError(absl::StrCat(
      "collective mismatch: this device called ", ours.text, " but device ",
      from, " called ", theirs, " as collective #", seq,
      " of the job; every device must call the same collectives in the "
      "same order"));
}
// ...and when its message has another size than this device expects.
inline absl::Status MessageSizeError(const Fingerprint& ours, int64_t from,
                                     uint64_t sent, uint64_t expected) {
  return absl::InvalidArgumentError(
      absl::StrCat("in ", ours.text, ", device ", from, " sent ", sent,
                   " bytes where ", expected, " were expected"));
}

// The header of one message within a job.
struct PeerMessage {
  uint64_t seq = 0;   // the collective's number within the job, from 0
  uint32_t step = 0;  // the message's number within the collective, per
                      // (sender, receiver) pair
  const Fingerprint* fingerprint = nullptr;  // Not owned; must be set.
};

class PeerTransport {
 public:
  virtual ~PeerTransport() = default;

  // This device's id in the job's mesh, and the mesh's size.
  virtual int64_t device() const = 0;
  virtual int64_t num_devices() const = 0;

  // Sends `data` to device `to`. Returns once the transport no longer needs
  // `data` (it has copied or sent it). May block while the link to `to` is
  // congested, never past the job's deadline. Sending to oneself is
  // allowed. Errors: UNAVAILABLE naming the peer if it is lost,
  // DEADLINE_EXCEEDED, CANCELLED/ABORTED if the job was aborted.
  virtual absl::Status Send(int64_t to, const PeerMessage& message,
                            absl::Span<const uint8_t> data) = 0;

  // As Send, but the caller leaves `data` unchanged until Settle returns,
  // so the transport may hand the buffer itself to the receiver instead of
  // copying it (shared memory between processes: the receiver reads it
  // straight from the sender, docs/DESIGN.md). By default: Send.
  virtual absl::Status Lend(int64_t to, const PeerMessage& message,
                            absl::Span<const uint8_t> data) {
    return Send(to, message, data);
  }
  // As Lend, except that the caller may change `data` as soon as it knows
  // the receiver took the message (it received something the receiver
  // sent after taking it), not only once Settle returns; before it frees
  // `data` it still calls Settle. For transports that read the bytes of
  // `data` once, before the receiver can have them (gRPC streams them to
  // the socket straight from `data`). By default: Send.
  virtual absl::Status LendUntilTaken(int64_t to, const PeerMessage& message,
                                      absl::Span<const uint8_t> data) {
    return Send(to, message, data);
  }
  // Waits until the receivers are done with every buffer this transport
  // was lent. With `abandon` (the caller failed and is about to free them)
  // it withdraws those not being read and returns OK. Errors: as Send;
  // DEADLINE_EXCEEDED after the per-collective timeout.
  virtual absl::Status Settle(bool abandon) { return absl::OkStatus(); }

  // Waits for the message (seq, step) from device `from` and copies its
  // payload into `out`, whose size must equal the payload's. Errors: as
  // Send; INVALID_ARGUMENT with both fingerprints if the sender's
  // fingerprint differs from ours, or if the sizes differ;
  // DEADLINE_EXCEEDED naming the peer and the collective if nothing
  // arrives before the job's deadline or the per-collective timeout.
  virtual absl::Status Recv(int64_t from, const PeerMessage& message,
                            absl::Span<uint8_t> out) = 0;

  // As Recv of a message of `size` bytes, but instead of copying the
  // payload into one buffer, hands it to `consume` in order, in chunks of
  // any size (an element may straddle two) that together are the whole
  // payload, on the calling thread before returning: a receiver that
  // combines the bytes with its own reads them once, where they arrived.
  // `consume` is called only for a message that passed Recv's checks.
  // Errors: as Recv. By default: Recv into a temporary buffer, one chunk.
  using ChunkConsumer = std::function<void(absl::Span<const uint8_t> chunk)>;
  virtual absl::Status RecvChunks(int64_t from, const PeerMessage& message,
                                  size_t size, const ChunkConsumer& consume) {
    // Not zero-filled: Recv overwrites all of it.
    std::unique_ptr<uint8_t[]> buffer(new uint8_t[size]);
    absl::Status s = Recv(from, message, absl::MakeSpan(buffer.get(), size));
    if (s.ok()) consume(absl::MakeConstSpan(buffer.get(), size));
    return s;
  }
};

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_PEER_TRANSPORT_H_
