// Parsing JSON from an untrusted source with its nesting bounded, so a
// deeply nested text cannot exhaust the stack or memory building values.
//
// Pure function; thread-safe.
#ifndef SHARDMAP_CORE_BOUNDED_JSON_H_
#define SHARDMAP_CORE_BOUNDED_JSON_H_

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace shardmap {

// INVALID_ARGUMENT "not JSON: <parser's reason>" or "nested deeper than
// <max_depth>".
absl::StatusOr<nlohmann::json> ParseBoundedJson(absl::string_view text,
                                                int max_depth);

}  // namespace shardmap

#endif  // SHARDMAP_CORE_BOUNDED_JSON_H_
