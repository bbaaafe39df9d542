#include "client/exit_codes.h"

#include "client/shard_client.h"

namespace shardmap {

int ExitCodeForStatus(const absl::Status& status) {
  // Never "retry" (75) for a call that must not be sent again blindly.
  if (ShardClient::NotSafeToRetry(status)) return kExitUnavailable;
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return kExitOk;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      return kExitDataErr;
    case absl::StatusCode::kNotFound:
      return kExitUsage;
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kCancelled:
      return kExitUnavailable;
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kResourceExhausted:
      return kExitTempFail;
    case absl::StatusCode::kAlreadyExists:  // a call_id's outputs are gone
      return kExitCantCreate;
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kUnauthenticated:
      return kExitNoPerm;
    default:
      return kExitSoftware;
  }
}

}  // namespace shardmap
