#include "client/exit_codes.h"

namespace shardmap {

int ExitCodeForStatus(const absl::Status& status) {
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
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kUnauthenticated:
      return kExitNoPerm;
    default:
      return kExitSoftware;
  }
}

}  // namespace shardmap
