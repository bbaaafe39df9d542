// Recursive-descent parser of the program language: one
// `lambda params: expr`, or one `def name(params):` whose body assigns
// names and ends with one `return`. Everything else Python has (imports,
// loops, conditionals, nested lambdas, dicts, ...) is refused here with
// "not part of the program language: ...".
//
// Thread-safe: a pure function.
#ifndef SHARDMAP_PROGRAM_PARSER_H_
#define SHARDMAP_PROGRAM_PARSER_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "program/ast.h"

namespace shardmap {
namespace program {

// Deepest nesting of expressions the parser accepts (the checker recurses
// along the tree, so this bounds its stack too).
inline constexpr int kMaxNesting = 100;

// INVALID_ARGUMENT with line, column, caret and what was expected.
absl::StatusOr<FunctionAst> Parse(absl::string_view source);

}  // namespace program
}  // namespace shardmap

#endif  // SHARDMAP_PROGRAM_PARSER_H_
