// What shardctl's resident-array commands (put, get, ls, rm, put-tree,
// save, restore) share: names as typed, exit codes, the --mesh flag and the
// connection to the coordinator.
//
// Thread-safe: the functions share no state.
#ifndef SHARDMAP_CLIENT_ARRAY_COMMAND_UTIL_H_
#define SHARDMAP_CLIENT_ARRAY_COMMAND_UTIL_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/shard_client.h"
#include "core/mesh.h"
#include "core/partition_spec.h"
#include "core/tensor.h"

namespace shardmap {

// A resident array's name as typed: a leading '@' (as in `run --arg @w`)
// is dropped.
std::string ArrayName(const std::string& text);

// The exit code of a failed call on resident arrays: NOT_FOUND is bad input
// data (65), not the unknown function ExitCodeForStatus assumes (64).
int ArrayExitCode(const absl::Status& s);

// The description of the array `name` in `existing` if it has another
// dtype, shape or sharding than `t` sharded by `spec` over `mesh` (putting
// `t` there needs --overwrite).
std::optional<std::string> Conflict(
    const std::vector<v1::ResidentInfo>& existing, const std::string& name,
    const Tensor& t, const Mesh& mesh, const PartitionSpec& spec);

// The exit code of a failed put of `t` as `name`: 73 (cannot create the
// output) when an array of another dtype, shape or sharding holds the
// name, as opposed to a lost worker (69).
int PutExitCode(const ShardClient& client, const absl::Status& s,
                const std::string& name, const Tensor& t, const Mesh& mesh,
                const PartitionSpec& spec);

// The --mesh flag. INVALID_ARGUMENT "--mesh: ..." if it does not parse.
absl::StatusOr<Mesh> ParseMeshFlag(const std::string& text);

// A client of the coordinator at `address` that resends up to `retries`
// times where that is safe. Errors as ShardClient::Create.
absl::StatusOr<std::unique_ptr<ShardClient>> Connect(const std::string& address,
                                                     int retries = 0);

}  // namespace shardmap

#endif  // SHARDMAP_CLIENT_ARRAY_COMMAND_UTIL_H_
