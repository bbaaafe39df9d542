// Status helpers shared by every library: early-return macros (our abseil
// has no status_macros.h), code names and message prefixes. No gRPC: the
// conversion to and from grpc::Status is rpc/grpc_status.h.
#ifndef SHARDMAP_CORE_STATUS_UTIL_H_
#define SHARDMAP_CORE_STATUS_UTIL_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#define SHARD_STATUS_CONCAT_INNER_(a, b) a##b
#define SHARD_STATUS_CONCAT_(a, b) SHARD_STATUS_CONCAT_INNER_(a, b)

#define SHARD_RETURN_IF_ERROR(expr)                      \
  do {                                                   \
    if (::absl::Status s_ = (expr); !s_.ok()) return s_; \
  } while (0)

#define SHARD_ASSIGN_OR_RETURN(lhs, expr)                                      \
  SHARD_ASSIGN_OR_RETURN_IMPL_(SHARD_STATUS_CONCAT_(statusor_, __LINE__), lhs, \
                               expr)
#define SHARD_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()

namespace shardmap {

// "INVALID_ARGUMENT", "NOT_FOUND", ... as gRPC spells the code names.
std::string StatusCodeName(absl::StatusCode code);

// Returns `status` with `prefix: ` in front of its message, same code.
absl::Status Annotate(const absl::Status& status, absl::string_view prefix);

}  // namespace shardmap

#endif  // SHARDMAP_CORE_STATUS_UTIL_H_
