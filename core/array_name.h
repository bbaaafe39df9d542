// The one rule for resident array names, applied wherever a name enters:
// put, put-tree, run outputs and states, checkpoint manifests and the
// worker's state directory.
//
// A name is a path of segments separated by '/'. A segment is 1 to
// kMaxNameSegmentBytes bytes of [A-Za-z0-9._-] and is not "." or "..";
// the whole name is at most kMaxNameBytes bytes. So a name can always be
// used as a relative path under a directory without leaving it, and each
// segment fits in a file name.
//
// Pure functions; thread-safe.
#ifndef SHARDMAP_CORE_ARRAY_NAME_H_
#define SHARDMAP_CORE_ARRAY_NAME_H_

#include <cstddef>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace shardmap {

inline constexpr size_t kMaxNameSegmentBytes = 255;
inline constexpr size_t kMaxNameBytes = 1024;

// INVALID_ARGUMENT naming `what` (e.g. "resident array name") and the
// rule broken: empty, too long, an empty, "." or ".." segment, a segment
// over 255 bytes, or a character outside [A-Za-z0-9._-/] (shown escaped,
// so a newline or a control byte is visible). The name is echoed
// truncated.
absl::Status ValidateArrayName(absl::string_view name,
                               absl::string_view what = "resident array name");

}  // namespace shardmap

#endif  // SHARDMAP_CORE_ARRAY_NAME_H_
