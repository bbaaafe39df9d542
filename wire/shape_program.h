// A native function's shape program (FunctionSignature.shape_program) made
// concrete for one call: its `{name}` placeholders replaced by the call's
// keyword arguments written as Python literals, so the program checker can
// give the function's output shapes, dtypes and costs without running it.
//
// Pure functions; thread-safe.
#ifndef SHARDMAP_WIRE_SHAPE_PROGRAM_H_
#define SHARDMAP_WIRE_SHAPE_PROGRAM_H_

#include <nlohmann/json.hpp>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace shardmap {

// JSON as Python: null None, true True, "x" 'x', [a, b] (a, b), [a] (a,).
std::string PythonLiteral(const nlohmann::json& value);

// `source` with every `{name}` replaced by PythonLiteral(kwargs[name]).
// INVALID_ARGUMENT naming the placeholder when kwargs lacks it or a brace
// is not closed.
absl::StatusOr<std::string> RenderShapeProgram(absl::string_view source,
                                               const nlohmann::json& kwargs);

}  // namespace shardmap

#endif  // SHARDMAP_WIRE_SHAPE_PROGRAM_H_
