// Errors that point into a program's source: "line L, column C: <what>",
// then the source line and a caret under the column, as the checker's
// messages do (program/checker.h).
//
// Thread-safe: pure functions.
#ifndef SHARDMAP_PROGRAM_SOURCE_ERROR_H_
#define SHARDMAP_PROGRAM_SOURCE_ERROR_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "program/ir.h"

namespace shardmap {
namespace program {

// The message text: "line L, column C: what\n  <line>\n  <spaces>^".
// Positions past the source's end point just after its last character.
std::string SourceMessage(absl::string_view source, SourcePos pos,
                          absl::string_view what);

// INVALID_ARGUMENT (or `code`) with SourceMessage as its message.
absl::Status SourceError(
    absl::string_view source, SourcePos pos, absl::string_view what,
    absl::StatusCode code = absl::StatusCode::kInvalidArgument);

}  // namespace program
}  // namespace shardmap

#endif  // SHARDMAP_PROGRAM_SOURCE_ERROR_H_
