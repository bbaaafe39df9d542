#include "worker/collectives/all_gather.h"

#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/status_util.h"

namespace shardmap {
namespace {

// The algorithms, explained after the sanity checks below.
absl::Status Direct(const AllGatherOptions& options, PeerTransport& transport,
                    size_t block_bytes);
absl::Status Ring(const AllGatherOptions& options, PeerTransport& transport,
                  size_t block_bytes);

}  // namespace

absl::Status AllGather(const AllGatherOptions& options,
                       PeerTransport& transport) {
  SHARD_RETURN_IF_ERROR(
      ValidateGroup(options.group, transport, "AllGatherOptions"));
  const size_t n = options.group.size();
  const size_t block_bytes = options.input.size();
  if (options.output.size() != n * block_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("AllGatherOptions.output has ", options.output.size(),
                     " bytes, not group size ", n, " x input ", block_bytes,
                     " bytes = ", n * block_bytes));
  }
  if (options.algorithm == Algorithm::kRecursiveDoubling) {
    return absl::InvalidArgumentError(
        "AllGatherOptions.algorithm is kRecursiveDoubling, which AllGather "
        "does not implement (use kAuto, kRing or kDirect)");
  }
  if (block_bytes == 0) return absl::OkStatus();
  const bool ring = options.algorithm == Algorithm::kRing ||
                    (options.algorithm == Algorithm::kAuto &&
                     options.output.size() > options.small_bytes);
  return ring ? Ring(options, transport, block_bytes)
              : Direct(options, transport, block_bytes);
}

namespace {

// Every rank contributes one block of block_bytes; the output holds the n
// blocks in rank order, block r at offset r * block_bytes. Blocks are only
// copied, never combined, so every rank ends with the same bytes.
//
// Direct exchange (output of at most small_bytes: latency bound). Each rank
// copies its block to its own position, sends it to every other rank, and
// receives block r from rank r straight into position r. One message each
// way per pair of ranks, step 0; one round trip in all.
//
// Ring (larger outputs: bandwidth bound). In round k = 0, 1, ..., n - 2
// every rank sends block (rank - k) mod n to its right neighbour and
// receives block (rank - k - 1) mod n from its left one, into its position
// in the output. The block a rank sends in round k + 1 is the one it
// received in round k, so each block travels once around the ring and
// every link carries (n - 1) blocks. Each block travels in pieces
// (Exchange): round k's piece i is step k * pieces + i.

PeerMessage MessageOf(const AllGatherOptions& options, uint32_t step) {
  return PeerMessage{options.tag.seq, step, &options.tag.fingerprint};
}

absl::Status Direct(const AllGatherOptions& options, PeerTransport& transport,
                    size_t block_bytes) {
  const GroupView& group = options.group;
  const int n = group.size();
  const int rank = group.rank;
  auto block = [&](int r) {
    return options.output.subspan(r * block_bytes, block_bytes);
  };

  std::memmove(block(rank).data(), options.input.data(), block_bytes);
  for (int i = 1; i < n; ++i) {
    SHARD_RETURN_IF_ERROR(transport.Send(group.devices[(rank + i) % n],
                                         MessageOf(options, 0), block(rank)));
  }
  for (int i = 1; i < n; ++i) {
    const int r = (rank + n - i) % n;
    SHARD_RETURN_IF_ERROR(
        transport.Recv(group.devices[r], MessageOf(options, 0), block(r)));
  }
  return absl::OkStatus();
}

absl::Status Ring(const AllGatherOptions& options, PeerTransport& transport,
                  size_t block_bytes) {
  const GroupView& group = options.group;
  const int n = group.size();
  const int rank = group.rank;
  auto block = [&](int r) {
    return options.output.subspan(r * block_bytes, block_bytes);
  };
  auto send_block = [&](int round) { return (rank + n - round) % n; };
  auto recv_block = [&](int round) { return (rank + 2 * n - round - 1) % n; };
  const int64_t right = group.devices[(rank + 1) % n];
  const int64_t left = group.devices[(rank + n - 1) % n];

  std::memmove(block(rank).data(), options.input.data(), block_bytes);
  const uint32_t pieces = ExchangePieces(block_bytes, options.exchange);
  for (int round = 0; round < n - 1; ++round) {
    SHARD_RETURN_IF_ERROR(Exchange(transport, options.tag, round * pieces,
                                   right, block(send_block(round)), left,
                                   block(recv_block(round)), options.exchange));
  }
  return absl::OkStatus();
}

}  // namespace

}  // namespace shardmap
