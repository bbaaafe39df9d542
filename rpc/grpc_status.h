// The one tested conversion between absl::Status (used inside every
// library) and grpc::Status (used only at service edges). The codes are
// numerically identical; only the message is carried over.
#ifndef SHARDMAP_RPC_GRPC_STATUS_H_
#define SHARDMAP_RPC_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace shardmap {

// A message over 4 KiB is truncated (gRPC refuses trailers over 8 KiB).
grpc::Status ToGrpcStatus(const absl::Status& status);
// A code outside gRPC's 17 canonical codes becomes UNKNOWN.
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace shardmap

#endif  // SHARDMAP_RPC_GRPC_STATUS_H_
