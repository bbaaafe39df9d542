// Reasons: a name for the few failures a client must tell apart from
// others of the same status code (e.g. to pick its exit code). Inside a
// process the reason is a payload of the absl::Status; over gRPC the server
// sends it as trailing metadata (kErrorReasonKey) and the client puts it
// back.
//
// Header-only, pure functions; thread-safe.
#ifndef SHARDMAP_CORE_ERROR_REASON_H_
#define SHARDMAP_CORE_ERROR_REASON_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/string_view.h"

namespace shardmap {

// The gRPC trailing metadata key (and the payload's type URL).
inline constexpr char kErrorReasonKey[] = "shardmap-error-reason";

// `save DIR` refused a DIR that is neither empty nor a checkpoint.
inline constexpr char kReasonCheckpointDirRefused[] = "checkpoint-dir-refused";

inline absl::Status WithReason(absl::Status status, absl::string_view reason) {
  status.SetPayload(kErrorReasonKey, absl::Cord(reason));
  return status;
}

// The reason `status` carries, or "".
inline std::string ReasonOf(const absl::Status& status) {
  auto payload = status.GetPayload(kErrorReasonKey);
  return payload.has_value() ? std::string(*payload) : std::string();
}

}  // namespace shardmap

#endif  // SHARDMAP_CORE_ERROR_REASON_H_
