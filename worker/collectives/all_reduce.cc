#include "worker/collectives/all_reduce.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status_util.h"
#include "worker/collectives/reduce.h"

namespace shardmap {
namespace {

// The algorithms, explained after the sanity checks below.
absl::Status RecursiveDoubling(const AllReduceOptions& options,
                               PeerTransport& transport);
absl::Status Direct(const AllReduceOptions& options, PeerTransport& transport);
absl::Status Ring(const AllReduceOptions& options, PeerTransport& transport);

}  // namespace

absl::Status AllReduce(const AllReduceOptions& options,
                       PeerTransport& transport) {
  SHARD_RETURN_IF_ERROR(
      ValidateGroup(options.group, transport, "AllReduceOptions"));
  const size_t element_bytes = ItemSize(options.dtype);
  if (options.data.size() % element_bytes != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("AllReduceOptions.data has ", options.data.size(),
                     " bytes, not a whole number of ", DTypeName(options.dtype),
                     " elements"));
  }
  if (options.piece_bytes < element_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("AllReduceOptions.piece_bytes is ", options.piece_bytes,
                     ", less than one ", DTypeName(options.dtype), " element (",
                     element_bytes, " bytes)"));
  }
  if (!options.input.empty() && options.input.size() != options.data.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "AllReduceOptions.input has ", options.input.size(), " bytes, not the ",
        options.data.size(), " of AllReduceOptions.data"));
  }
  Algorithm algorithm = options.algorithm;
  if (algorithm == Algorithm::kAuto) {
    algorithm = options.data.size() <= options.small_bytes
                    ? Algorithm::kRecursiveDoubling
                    : Algorithm::kRing;
  }
  // Only the ring reads a separate input as it goes; the others start from
  // a copy.
  if (!options.data.empty() && !options.input.empty() &&
      (algorithm != Algorithm::kRing || options.group.size() == 1)) {
    std::memcpy(options.data.data(), options.input.data(), options.data.size());
  }
  if (options.group.size() == 1 || options.data.empty()) {
    return absl::OkStatus();
  }
  switch (algorithm) {
    case Algorithm::kRecursiveDoubling:
      return RecursiveDoubling(options, transport);
    case Algorithm::kDirect:
      return Direct(options, transport);
    case Algorithm::kRing:
    case Algorithm::kAuto:
      break;
  }
  return Ring(options, transport);
}

namespace {

// Every rank must end with exactly the same bytes: replicated outputs are
// compared by digest, and floating-point sums taken in different orders
// differ in the last bits. None of the three algorithms below lets two
// ranks combine different operands, or the same operands in a different
// order: each combination is either computed once and copied, or computed
// identically by every rank that needs it.
//
// Recursive doubling (arrays of at most small_bytes: latency bound).
// Let `lanes` be the largest power of two not above the group size n, and
// `extras` = n - lanes.
//  1. Fold: the first 2 * extras ranks pair up as (2i, 2i + 1). The odd
//     one, a folded rank, sends its array to the even one, which combines
//     them (its own first) and stands for both from then on. The lanes
//     remaining ranks get a virtual rank: rank / 2 below 2 * extras,
//     rank - extras from there on.
//  2. Double: in round k = 0, 1, ..., log2(lanes) - 1, virtual rank v
//     exchanges its partial result with its partner, virtual rank
//     v ^ 2^k, and combines the two partials, the lower virtual rank's
//     first. After round k each rank holds the combination of its aligned
//     block of 2^(k + 1) virtual ranks.
//  3. Unfold: every even rank below 2 * extras sends the result to the
//     folded rank it stands for.
// Both partners of a round combine the same two partials in the same
// order, so by induction every rank of a block holds the same bytes after
// each round, and a folded rank receives a copy: every rank ends with the
// same fixed tree of combinations, bit for bit. Messages: step 0 for the
// fold, step 1 + k for round k, step 1 + log2(lanes) for the unfold.
//
// Direct exchange (Algorithm::kDirect): every rank sends its array to every
// other rank and combines all n arrays in rank order,
// (((x0 op x1) op x2) ... op x(n-1)): the same operands in the same order
// everywhere. One round trip, but n - 1 messages each way per rank.
//
// Ring (larger arrays: bandwidth bound). The elements are split into n
// segments, one per rank, as evenly as possible: the first count % n
// segments have one element more, and a segment may be empty. Each segment
// moves in pieces of at most piece_bytes, pieces_per_segment of them (as
// many as the largest segment needs; a smaller segment's last pieces are
// empty and not sent). In round k = 0, 1, ..., 2(n - 1) - 1 every rank
// sends piece p of segment (rank - k) mod n to its right neighbour and
// receives piece p of segment (rank - k - 1) mod n from its left one:
//  - in the first n - 1 rounds (reduce-scatter) the receiver combines the
//    incoming piece into its own copy of the segment (its own first);
//    after them rank r holds segment (r + 1) mod n combined over all ranks;
//  - in the last n - 1 rounds (all-gather) the receiver overwrites its copy
//    with the incoming piece, so each combined segment travels once around
//    the ring.
// A segment is combined exactly once, in a fixed order around the ring, and
// every other rank receives a copy of those bytes.
//
// A unit is one (round, piece): unit u = k * pieces_per_segment + p, which
// is also its message's step. Every rank handles the units in this order.
// The piece a rank sends in unit u is the piece it received in unit
// u - pieces_per_segment (the same piece one round earlier; in round 0 its
// own), so it can send
// ahead of its receiving: it keeps `window` units in flight, sending units
// up to u + window - 1 before it waits for unit u. While it receives and
// combines piece u, the next pieces are already on their way to the right
// neighbour, which can start on them as soon as it is done with piece u.
// The window is at most pieces_per_segment (with one piece per segment,
// unit u + 1 needs unit u and the window shrinks to one). Because no rank
// runs more than `window` units ahead of its own receiving, a link that
// buffers that many pieces never stalls the ring for good.

PeerMessage MessageOf(const AllReduceOptions& options, uint64_t step) {
  return PeerMessage{options.tag.seq, static_cast<uint32_t>(step),
                     &options.tag.fingerprint};
}

absl::Status RecursiveDoubling(const AllReduceOptions& options,
                               PeerTransport& transport) {
  const GroupView& group = options.group;
  const int n = group.size();
  const int rank = group.rank;
  absl::Span<uint8_t> data = options.data;

  int lanes = 1;
  int rounds = 0;
  while (lanes * 2 <= n) {
    lanes *= 2;
    ++rounds;
  }
  const int extras = n - lanes;
  const uint64_t fold_step = 0;
  const uint64_t unfold_step = 1 + rounds;
  auto rank_of_virtual = [&](int virtual_rank) {
    return virtual_rank < extras ? 2 * virtual_rank : virtual_rank + extras;
  };
  const bool has_fold_partner = rank < 2 * extras;

  if (has_fold_partner && rank % 2 == 1) {  // a folded rank
    const int64_t stand_in = group.devices[rank - 1];
    SHARD_RETURN_IF_ERROR(
        transport.Send(stand_in, MessageOf(options, fold_step), data));
    return transport.Recv(stand_in, MessageOf(options, unfold_step), data);
  }

  std::vector<uint8_t> partial(data.size());  // the partner's partial
  if (has_fold_partner) {
    SHARD_RETURN_IF_ERROR(transport.Recv(group.devices[rank + 1],
                                         MessageOf(options, fold_step),
                                         absl::MakeSpan(partial)));
    ReduceInto(options.dtype, options.op, data, partial);
  }
  const int virtual_rank = has_fold_partner ? rank / 2 : rank - extras;
  for (int k = 0; k < rounds; ++k) {
    const int partner_virtual_rank = virtual_rank ^ (1 << k);
    const int64_t partner =
        group.devices[rank_of_virtual(partner_virtual_rank)];
    const PeerMessage message = MessageOf(options, 1 + k);
    SHARD_RETURN_IF_ERROR(transport.Send(partner, message, data));
    SHARD_RETURN_IF_ERROR(
        transport.Recv(partner, message, absl::MakeSpan(partial)));
    if (virtual_rank < partner_virtual_rank) {
      ReduceInto(options.dtype, options.op, data, partial);
    } else {
      ReduceInto(options.dtype, options.op, absl::MakeSpan(partial), data);
      std::memcpy(data.data(), partial.data(), data.size());
    }
  }
  if (has_fold_partner) {
    SHARD_RETURN_IF_ERROR(transport.Send(
        group.devices[rank + 1], MessageOf(options, unfold_step), data));
  }
  return absl::OkStatus();
}

absl::Status Direct(const AllReduceOptions& options, PeerTransport& transport) {
  const GroupView& group = options.group;
  const int n = group.size();
  const int rank = group.rank;
  absl::Span<uint8_t> data = options.data;
  const PeerMessage message = MessageOf(options, 0);

  const std::vector<uint8_t> mine(data.begin(), data.end());
  for (int i = 1; i < n; ++i) {
    SHARD_RETURN_IF_ERROR(
        transport.Send(group.devices[(rank + i) % n], message, mine));
  }
  std::vector<uint8_t> theirs(data.size());
  for (int r = 0; r < n; ++r) {
    absl::Span<const uint8_t> contribution = mine;
    if (r != rank) {
      SHARD_RETURN_IF_ERROR(
          transport.Recv(group.devices[r], message, absl::MakeSpan(theirs)));
      contribution = theirs;
    }
    if (r == 0) {
      std::memcpy(data.data(), contribution.data(), data.size());
    } else {
      ReduceInto(options.dtype, options.op, data, contribution);
    }
  }
  return absl::OkStatus();
}

absl::Status Ring(const AllReduceOptions& options, PeerTransport& transport) {
  const GroupView& group = options.group;
  const int n = group.size();
  const int rank = group.rank;
  absl::Span<uint8_t> data = options.data;
  const size_t element_bytes = ItemSize(options.dtype);
  const size_t count = data.size() / element_bytes;

  // Segments and pieces, in elements.
  const size_t segment_base = count / n;
  const size_t segment_extra = count % n;
  const size_t largest_segment = segment_base + (segment_extra > 0 ? 1 : 0);
  const size_t piece_elements = options.piece_bytes / element_bytes;
  const uint64_t pieces_per_segment =
      (largest_segment + piece_elements - 1) / piece_elements;
  const uint64_t rounds = 2 * static_cast<uint64_t>(n - 1);
  const uint64_t units = rounds * pieces_per_segment;
  if (units - 1 > std::numeric_limits<uint32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "AllReduceOptions.piece_bytes is ", options.piece_bytes,
        ": the ring would need ", units, " messages per link for ", data.size(),
        " bytes over ", n, " ranks, more than a step can number"));
  }
  auto segment_begin = [&](int segment) {
    return segment * segment_base + std::min<size_t>(segment, segment_extra);
  };
  auto segment_elements = [&](int segment) {
    return segment_base + (static_cast<size_t>(segment) < segment_extra);
  };
  auto piece_of = [&](auto span, int segment, uint64_t piece) {
    const size_t elements = segment_elements(segment);
    const size_t begin = std::min<size_t>(piece * piece_elements, elements);
    const size_t end = std::min<size_t>(begin + piece_elements, elements);
    return span.subspan((segment_begin(segment) + begin) * element_bytes,
                        (end - begin) * element_bytes);
  };
  // With a separate input, round 0 sends from it and the reduce-scatter
  // combines it with what arrives (each segment a rank combines there is
  // one it has not touched yet); `data` is only ever written before it is
  // read or sent.
  const absl::Span<const uint8_t> input =
      options.input.empty() ? absl::Span<const uint8_t>(data) : options.input;
  auto send_segment = [&](uint64_t round) {
    return static_cast<int>((rank + n - round % n) % n);
  };
  auto recv_segment = [&](uint64_t round) {
    return static_cast<int>((rank + 2 * n - round % n - 1) % n);
  };

  const int64_t right = group.devices[(rank + 1) % n];
  const int64_t left = group.devices[(rank + n - 1) % n];
  const uint64_t window = std::min<uint64_t>(
      static_cast<uint64_t>(std::max(1, options.window)), pieces_per_segment);

  // Pieces are lent until taken (PeerTransport::LendUntilTaken: over gRPC
  // sent from `data` without a copy) and settled before returning. A piece
  // is changed only after its receiver took it: in the reduce-scatter a
  // rank sends segment s before anyone else's contribution reaches it, and
  // only overwrites s in the all-gather, with the combined segment, which
  // includes its piece as its right neighbour received it; all-gather
  // pieces are final.
  // Incoming pieces are combined straight from where the transport holds
  // them (RecvChunks), not copied out first.
  auto run = [&]() -> absl::Status {
    uint64_t sent = 0;  // units sent so far
    for (uint64_t unit = 0; unit < units; ++unit) {
      for (; sent < units && sent < unit + window; ++sent) {
        const uint64_t send_round = sent / pieces_per_segment;
        absl::Span<const uint8_t> piece =
            piece_of(send_round == 0 ? input : absl::Span<const uint8_t>(data),
                     send_segment(send_round), sent % pieces_per_segment);
        if (piece.empty()) continue;
        SHARD_RETURN_IF_ERROR(
            transport.LendUntilTaken(right, MessageOf(options, sent), piece));
      }
      const uint64_t round = unit / pieces_per_segment;
      absl::Span<uint8_t> piece =
          piece_of(data, recv_segment(round), unit % pieces_per_segment);
      if (piece.empty()) continue;
      if (round < static_cast<uint64_t>(n - 1)) {  // reduce-scatter
        ChunkedReduce reduce(
            options.dtype, options.op, piece,
            piece_of(input, recv_segment(round), unit % pieces_per_segment));
        SHARD_RETURN_IF_ERROR(transport.RecvChunks(
            left, MessageOf(options, unit), piece.size(),
            [&reduce](absl::Span<const uint8_t> chunk) { reduce.Add(chunk); }));
      } else {  // all-gather
        SHARD_RETURN_IF_ERROR(
            transport.Recv(left, MessageOf(options, unit), piece));
      }
    }
    return absl::OkStatus();
  };
  return RunAndSettle(transport, run);
}

}  // namespace

}  // namespace shardmap
