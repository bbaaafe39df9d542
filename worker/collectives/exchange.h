// Exchange: send one buffer to a device and receive one from a device (the
// same or another) at once, in pieces, the way a ring step or a ppermute
// moves a large block.
//
// A block sent as one message must sit somewhere whole until its receiver
// asks for it: both ends of a ring step send before they receive, so the
// sender cannot wait for the receiver. Over shared memory that means the
// bytes that do not fit the channel's ring are copied aside and pushed in
// later by another thread, three copies where two do. Sent in pieces, at
// most `window` ahead of the pieces received, no more than window pieces
// per link are ever in flight: they fit the ring, nothing is copied aside,
// and sending overlaps receiving on one thread. The pieces are lent
// (PeerTransport::Lend) and settled before Exchange returns: between
// processes that allow it the receiver copies them straight from `send`.
#ifndef SHARDMAP_WORKER_COLLECTIVES_EXCHANGE_H_
#define SHARDMAP_WORKER_COLLECTIVES_EXCHANGE_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "worker/collectives/collective_types.h"
#include "worker/transport/peer_transport.h"

namespace shardmap {

struct ExchangeOptions {
  // Pieces of at most this many bytes...
  size_t piece_bytes = 1 << 20;
  // ...and at most this many sent ahead of the pieces received.
  int window = 3;
};

// How many pieces (messages) Exchange uses for `bytes` bytes: at least one,
// so an empty block is one empty message.
uint32_t ExchangePieces(size_t bytes, const ExchangeOptions& options);

// Sends `send` to device `to` and receives `recv` from device `from`;
// `to` < 0 sends nothing and `from` < 0 receives nothing. Piece i travels
// as step `first_step` + i of the collective `tag`; the sender's `send`
// and the receiver's `recv` must have the same size, so both count the
// same pieces. `send` and `recv` must not overlap. Errors: the
// transport's.
absl::Status Exchange(PeerTransport& transport, const CollectiveTag& tag,
                      uint32_t first_step, int64_t to,
                      absl::Span<const uint8_t> send, int64_t from,
                      absl::Span<uint8_t> recv,
                      const ExchangeOptions& options = {});

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_COLLECTIVES_EXCHANGE_H_
