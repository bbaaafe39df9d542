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

  // Pairwise exchange. The input holds n chunks of chunk_bytes; chunk j goes
  // to rank j, and the chunk rank j sends here lands at position j of the
  // output. Each rank copies its own chunk (position rank) locally; then in
  // round i = 1, ..., n - 1 it sends chunk rank + i to rank + i while it
  // receives from rank - i straight into output position rank - i (mod n),
  // in pieces (Exchange), so every round is a cyclic shift that streams
  // through the links without setting whole chunks aside. Each pair of
  // ranks exchanges in exactly one round, so its pieces are steps 0, 1, ...
  // Every pair exchanges exactly the bytes the other needs, so no ring
  // would move fewer: AllToAll has no bandwidth-saving variant.
  auto input_chunk = [&](int j) {
    return options.input.subspan(j * chunk_bytes, chunk_bytes);
  };
  auto output_chunk = [&](int j) {
    return options.output.subspan(j * chunk_bytes, chunk_bytes);
  };
  std::memcpy(output_chunk(rank).data(), input_chunk(rank).data(), chunk_bytes);
  for (int i = 1; i < n; ++i) {
    const int to = (rank + i) % n;
    const int from = (rank + n - i) % n;
    SHARD_RETURN_IF_ERROR(Exchange(transport, options.tag, /*first_step=*/0,
                                   group.devices[to], input_chunk(to),
                                   group.devices[from], output_chunk(from),
                                   options.exchange));
  }
  return absl::OkStatus();
}

}  // namespace shardmap
