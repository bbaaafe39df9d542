#include "worker/collectives/all_to_all.h"

#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/status_util.h"

namespace shardmap {

absl::Status AllToAll(const AllToAllOptions& options,
                      PeerTransport& transport) {
  SHARD_RETURN_IF_ERROR(
      ValidateGroup(options.group, transport, "AllToAllOptions"));
  const GroupView& group = options.group;
  const int n = group.size();
  const int rank = group.rank;
  if (options.input.size() % n != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("AllToAllOptions.input has ", options.input.size(),
                     " bytes, not ", n, " equal chunks"));
  }
  if (options.output.size() != options.input.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("AllToAllOptions.output has ", options.output.size(),
                     " bytes, not the input's ", options.input.size()));
  }
  const size_t chunk_bytes = options.input.size() / n;
  if (chunk_bytes == 0) return absl::OkStatus();

  // Direct exchange. The input holds n chunks of chunk_bytes; chunk j goes to
  // rank j, and the chunk rank j sends here lands at position j of the
  // output. Each rank copies its own chunk (position rank) locally, sends
  // chunk j to rank j for every other j, then receives from every other rank
  // j straight into output position j: one message each way per pair of
  // ranks, step 0. Sends go out in the order rank + 1, rank + 2, ... and
  // receives are taken in the order rank - 1, rank - 2, ..., so that the
  // first message each rank waits for is the first one its left neighbour
  // sent. Every pair of ranks exchanges exactly the bytes the other needs,
  // so no ring would move fewer: AllToAll has no bandwidth-saving variant.
  auto input_chunk = [&](int j) {
    return options.input.subspan(j * chunk_bytes, chunk_bytes);
  };
  auto output_chunk = [&](int j) {
    return options.output.subspan(j * chunk_bytes, chunk_bytes);
  };
  const PeerMessage message{options.tag.seq, 0, &options.tag.fingerprint};

  for (int i = 1; i < n; ++i) {
    const int j = (rank + i) % n;
    SHARD_RETURN_IF_ERROR(
        transport.Send(group.devices[j], message, input_chunk(j)));
  }
  std::memmove(output_chunk(rank).data(), input_chunk(rank).data(),
               chunk_bytes);
  for (int i = 1; i < n; ++i) {
    const int j = (rank + n - i) % n;
    SHARD_RETURN_IF_ERROR(
        transport.Recv(group.devices[j], message, output_chunk(j)));
  }
  return absl::OkStatus();
}

}  // namespace shardmap
