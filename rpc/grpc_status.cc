#include "rpc/grpc_status.h"

#include "core/bounded_input.h"

namespace shardmap {
namespace {

// Longest message ToGrpcStatus carries: gRPC refuses trailers over 8 KiB
// ("received initial metadata size exceeds limit").
constexpr size_t kMaxStatusMessageBytes = 4096;

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // The message travels in a trailer, which peers refuse over 8 KiB; a
  // message that long would turn the error into an unrelated one.
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      Truncate(status.message(), kMaxStatusMessageBytes));
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  const int code = static_cast<int>(status.error_code());
  // gRPC has exactly the 17 canonical codes; anything else is a bug in a
  // peer, reported as UNKNOWN rather than trusted.
  if (code < 0 || code > static_cast<int>(absl::StatusCode::kUnauthenticated)) {
    return absl::UnknownError(status.error_message());
  }
  return absl::Status(static_cast<absl::StatusCode>(code),
                      status.error_message());
}

}  // namespace shardmap
