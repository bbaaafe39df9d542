#include "worker/collectives/permute.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status_util.h"

namespace shardmap {
namespace {

std::string PairsText(const std::vector<std::pair<int, int>>& pairs) {
  return absl::StrCat(
      "[",
      absl::StrJoin(pairs, ", ",
                    [](std::string* out, const std::pair<int, int>& pair) {
                      absl::StrAppend(out, "(", pair.first, ", ", pair.second,
                                      ")");
                    }),
      "]");
}

// The pairs are validated before anything is sent, from nothing but the
// pairs and the group size, so every rank reaches the same verdict: either
// all fail with the same INVALID_ARGUMENT or all proceed. (A rank that went
// ahead would leave a message nobody receives, or wait for one nobody
// sends.)
absl::Status ValidatePairs(const std::vector<std::pair<int, int>>& pairs,
                           int n) {
  std::vector<bool> is_source(n, false);
  std::vector<bool> is_destination(n, false);
  for (const auto& [source, destination] : pairs) {
    for (const int rank : {source, destination}) {
      if (rank < 0 || rank >= n) {
        return absl::InvalidArgumentError(absl::StrCat(
            "PermuteOptions.pairs names rank ", rank, ", outside [0, ", n,
            ") for a group of ", n, ", got ", PairsText(pairs)));
      }
    }
    if (is_source[source] || is_destination[destination]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "PermuteOptions.pairs: sources and destinations must be unique, "
          "but ",
          is_source[source] ? absl::StrCat("source ", source)
                            : absl::StrCat("destination ", destination),
          " repeats, got ", PairsText(pairs)));
    }
    is_source[source] = true;
    is_destination[destination] = true;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Permute(const PermuteOptions& options, PeerTransport& transport) {
  SHARD_RETURN_IF_ERROR(
      ValidateGroup(options.group, transport, "PermuteOptions"));
  if (options.output.size() != options.input.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("PermuteOptions.output has ", options.output.size(),
                     " bytes, not the input's ", options.input.size()));
  }
  const GroupView& group = options.group;
  const int rank = group.rank;
  SHARD_RETURN_IF_ERROR(ValidatePairs(options.pairs, group.size()));

  // Each pair (source, destination) moves the source's whole input to the
  // destination's output: the source sends it (in pieces, steps 0, 1, ...),
  // the destination receives it. A rank is at most one pair's source and at
  // most one pair's destination, so it sends at most once and receives at most
  // once. A rank that is no pair's destination fills its output with zeros,
  // and a pair (r, r) copies locally without a message.

  int destination = -1;  // where this rank's input goes, if anywhere
  int source = -1;       // whose input this rank receives, if anyone's
  for (const auto& pair : options.pairs) {
    if (pair.first == rank) destination = pair.second;
    if (pair.second == rank) source = pair.first;
  }
  if (options.input.empty()) return absl::OkStatus();
  // Sent in pieces while the pieces from `source` arrive (Exchange), so a
  // large block streams through the link instead of being set aside whole.
  const int64_t to =
      destination >= 0 && destination != rank ? group.devices[destination] : -1;
  const int64_t from =
      source >= 0 && source != rank ? group.devices[source] : -1;
  SHARD_RETURN_IF_ERROR(Exchange(transport, options.tag, /*first_step=*/0, to,
                                 options.input, from, options.output,
                                 options.exchange));
  if (source < 0) {
    std::memset(options.output.data(), 0, options.output.size());
  } else if (source == rank) {
    std::memmove(options.output.data(), options.input.data(),
                 options.input.size());
  }
  return absl::OkStatus();
}

}  // namespace shardmap
