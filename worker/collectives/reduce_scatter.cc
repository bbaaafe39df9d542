#include "worker/collectives/reduce_scatter.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status_util.h"
#include "worker/collectives/reduce.h"

namespace shardmap {
namespace {

// The algorithms, explained after the sanity checks below.
absl::Status Direct(const ReduceScatterOptions& options,
                    PeerTransport& transport, size_t chunk_bytes);
absl::Status Ring(const ReduceScatterOptions& options, PeerTransport& transport,
                  size_t chunk_bytes);

}  // namespace

absl::Status ReduceScatter(const ReduceScatterOptions& options,
                           PeerTransport& transport) {
  SHARD_RETURN_IF_ERROR(
      ValidateGroup(options.group, transport, "ReduceScatterOptions"));
  const size_t n = options.group.size();
  const size_t element_bytes = ItemSize(options.dtype);
  const std::string element = DTypeName(options.dtype);
  if (options.input.size() % (n * element_bytes) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("ReduceScatterOptions.input has ", options.input.size(),
                     " bytes, not ", n, " equal chunks of whole ", element,
                     " elements (", element_bytes, " bytes each)"));
  }
  const size_t chunk_bytes = options.input.size() / n;
  if (options.output.size() != chunk_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ReduceScatterOptions.output has ", options.output.size(),
        " bytes, not one chunk of the input: ", options.input.size(), " / ", n,
        " = ", chunk_bytes, " bytes"));
  }
  if (options.piece_bytes < element_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ReduceScatterOptions.piece_bytes is ", options.piece_bytes,
        ", less than one ", element, " element (", element_bytes, " bytes)"));
  }
  if (options.algorithm == Algorithm::kRecursiveDoubling) {
    return absl::InvalidArgumentError(
        "ReduceScatterOptions.algorithm is kRecursiveDoubling, which "
        "ReduceScatter does not implement (use kAuto, kRing or kDirect)");
  }
  if (chunk_bytes == 0) return absl::OkStatus();
  if (n == 1) {
    std::memmove(options.output.data(), options.input.data(), chunk_bytes);
    return absl::OkStatus();
  }
  const bool ring = options.algorithm == Algorithm::kRing ||
                    (options.algorithm == Algorithm::kAuto &&
                     options.input.size() > options.small_bytes);
  return ring ? Ring(options, transport, chunk_bytes)
              : Direct(options, transport, chunk_bytes);
}

namespace {

// The input holds n chunks of chunk_bytes, chunk c meant for rank c; rank r
// ends with chunk r combined over all ranks. Each chunk is combined by one
// rank in a fixed order, so the result depends on nothing but the inputs.
//
// Direct exchange (inputs of at most small_bytes: latency bound). Each rank
// sends chunk j of its input to rank j, then combines the n copies of its
// own chunk in rank order, (((c0 op c1) op c2) ... op c(n-1)), receiving
// each from its rank. One message each way per pair of ranks, step 0.
//
// Ring (larger inputs: bandwidth bound). In round k = 0, 1, ..., n - 2
// every rank sends chunk (rank - k - 1) mod n to its right neighbour and
// receives chunk (rank - k - 2) mod n from its left one. It combines the
// incoming chunk with its own input's copy of that chunk (the incoming
// first) into a carry, and sends the carry on in round k + 1. In the last
// round the chunk received is (rank - n) mod n = rank, and the combination
// goes to the output instead of a carry. So chunk c starts at rank c + 1
// and collects one contribution per hop until it reaches rank c.
//
// As in AllReduce's ring, each chunk moves in pieces of at most
// piece_bytes, pieces_per_chunk of them; a unit is one (round, piece), unit
// u = k * pieces_per_chunk + p, which is also its message's step. The piece
// sent in unit u is the carry piece received in unit u - pieces_per_chunk,
// so a rank keeps two units in flight: it sends unit u + 1 before it waits
// for unit u (one when a chunk is a single piece). One carry is enough:
// a rank sends unit u no later than it receives unit u, which is the next
// write to the same carry piece.

PeerMessage MessageOf(const ReduceScatterOptions& options, uint64_t step) {
  return PeerMessage{options.tag.seq, static_cast<uint32_t>(step),
                     &options.tag.fingerprint};
}

absl::Status Direct(const ReduceScatterOptions& options,
                    PeerTransport& transport, size_t chunk_bytes) {
  const GroupView& group = options.group;
  const int n = group.size();
  const int rank = group.rank;
  auto chunk = [&](int c) {
    return options.input.subspan(c * chunk_bytes, chunk_bytes);
  };
  const PeerMessage message = MessageOf(options, 0);

  for (int i = 1; i < n; ++i) {
    const int j = (rank + i) % n;
    SHARD_RETURN_IF_ERROR(transport.Send(group.devices[j], message, chunk(j)));
  }
  std::vector<uint8_t> theirs(chunk_bytes);
  for (int r = 0; r < n; ++r) {
    absl::Span<const uint8_t> contribution = chunk(rank);
    if (r != rank) {
      SHARD_RETURN_IF_ERROR(
          transport.Recv(group.devices[r], message, absl::MakeSpan(theirs)));
      contribution = theirs;
    }
    if (r == 0) {
      std::memcpy(options.output.data(), contribution.data(), chunk_bytes);
    } else {
      ReduceInto(options.dtype, options.op, options.output, contribution);
    }
  }
  return absl::OkStatus();
}

absl::Status Ring(const ReduceScatterOptions& options, PeerTransport& transport,
                  size_t chunk_bytes) {
  const GroupView& group = options.group;
  const int n = group.size();
  const int rank = group.rank;
  const size_t element_bytes = ItemSize(options.dtype);

  const size_t piece_bytes =
      options.piece_bytes / element_bytes * element_bytes;
  const uint64_t pieces_per_chunk =
      (chunk_bytes + piece_bytes - 1) / piece_bytes;
  const uint64_t rounds = n - 1;
  const uint64_t units = rounds * pieces_per_chunk;
  if (units - 1 > std::numeric_limits<uint32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ReduceScatterOptions.piece_bytes is ", options.piece_bytes,
        ": the ring would need ", units, " messages per link for chunks of ",
        chunk_bytes, " bytes, more than a step can number"));
  }
  auto piece_range = [&](uint64_t piece) {
    const size_t begin = piece * piece_bytes;
    return std::make_pair(begin, std::min(piece_bytes, chunk_bytes - begin));
  };
  auto input_piece = [&](int chunk, uint64_t piece) {
    const auto [begin, size] = piece_range(piece);
    return options.input.subspan(chunk * chunk_bytes + begin, size);
  };
  auto send_chunk = [&](uint64_t round) {
    return static_cast<int>((rank + 2 * n - round - 1) % n);
  };
  auto recv_chunk = [&](uint64_t round) {
    return static_cast<int>((rank + 2 * n - round - 2) % n);
  };
  std::vector<uint8_t> carry(n > 2 ? chunk_bytes : 0);
  // Where round `round` puts its combination, which round + 1 sends.
  auto carry_piece = [&](uint64_t round, uint64_t piece) {
    const auto [begin, size] = piece_range(piece);
    absl::Span<uint8_t> target =
        round + 1 == rounds ? options.output : absl::MakeSpan(carry);
    return target.subspan(begin, size);
  };

  const int64_t right = group.devices[(rank + 1) % n];
  const int64_t left = group.devices[(rank + n - 1) % n];
  const uint64_t window = std::min<uint64_t>(2, pieces_per_chunk);
  uint64_t sent = 0;  // units sent so far
  for (uint64_t unit = 0; unit < units; ++unit) {
    for (; sent < units && sent < unit + window; ++sent) {
      const uint64_t round = sent / pieces_per_chunk;
      const uint64_t piece = sent % pieces_per_chunk;
      absl::Span<const uint8_t> outgoing =
          round == 0 ? input_piece(send_chunk(0), piece)
                     : carry_piece(round - 1, piece);
      SHARD_RETURN_IF_ERROR(
          transport.Send(right, MessageOf(options, sent), outgoing));
    }
    const uint64_t round = unit / pieces_per_chunk;
    const uint64_t piece = unit % pieces_per_chunk;
    absl::Span<uint8_t> incoming = carry_piece(round, piece);
    SHARD_RETURN_IF_ERROR(
        transport.Recv(left, MessageOf(options, unit), incoming));
    ReduceInto(options.dtype, options.op, incoming,
               input_piece(recv_chunk(round), piece));
  }
  return absl::OkStatus();
}

}  // namespace

}  // namespace shardmap
