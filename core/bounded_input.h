// Bounds for text that comes from outside the process: JSON (--kwargs,
// checkpoint manifests, state-dir metadata, client inputs) is parsed only
// when it nests at most kMaxJsonDepth levels, and values echoed in error
// messages are cut to a bounded length.
//
// nlohmann's parser keeps its stack on the heap, but copying, comparing and
// dumping a parsed value recurse once per level: ~75,000 levels of "[[[..."
// (150 KB of text) overflow a thread's stack. The depth is therefore checked
// by a scan of the text before anything is parsed. An echoed value must stay
// short because a gRPC status message travels in a trailer that the peer
// refuses over 8 KiB ("received initial metadata size exceeds limit").
//
// Thread-safe: the functions share no state.
#ifndef SHARDMAP_CORE_BOUNDED_INPUT_H_
#define SHARDMAP_CORE_BOUNDED_INPUT_H_

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace shardmap {

// Deepest nesting of arrays and objects accepted in JSON input.
inline constexpr int kMaxJsonDepth = 64;
// Longest value Truncate passes through whole.
inline constexpr size_t kMaxEchoBytes = 200;

// `value` if it is at most `max_bytes` long, else its first `max_bytes`
// bytes (cut at a UTF-8 character boundary) followed by
// "... (N bytes)". For quoting user input in messages.
std::string Truncate(absl::string_view value, size_t max_bytes = kMaxEchoBytes);

// INVALID_ARGUMENT "<what> nests deeper than <max_depth> levels (at byte N)"
// if the arrays and objects of the JSON `text` nest deeper than `max_depth`
// (brackets inside strings do not count). Malformed text is not reported
// here: its depth is what the parser would reach before failing.
absl::Status CheckJsonDepth(absl::string_view text, absl::string_view what,
                            int max_depth = kMaxJsonDepth);

// Parses the JSON `text` after CheckJsonDepth. `what` names the input in
// every message ("--kwargs JSON", "manifest '/x/manifest.json'").
// Errors: INVALID_ARGUMENT "malformed <what> at byte N: ..." for text that
// is not JSON, a number out of range, or nesting that is too deep; the
// parser's message is truncated.
absl::StatusOr<nlohmann::json> ParseJson(absl::string_view text,
                                         absl::string_view what,
                                         int max_depth = kMaxJsonDepth);

}  // namespace shardmap

#endif  // SHARDMAP_CORE_BOUNDED_INPUT_H_
