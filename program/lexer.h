// Splits a program's source into tokens, Python style: names, numbers,
// strings, operators, and the end of each logical line (newlines inside
// brackets or after a backslash do not end a line; comments are dropped).
// Each token carries its 1-based line and column, and the first token of
// a line its indentation.
//
// Thread-safe: a pure function.
#ifndef SHARDMAP_PROGRAM_LEXER_H_
#define SHARDMAP_PROGRAM_LEXER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "program/ir.h"

namespace shardmap {
namespace program {

enum class TokenKind {
  kName,
  kInt,
  kFloat,
  kString,
  kOp,       // punctuation and operators; `text` holds it ("**", "(", ...)
  kNewline,  // end of a logical line
  kEnd,
};

struct Token {
  TokenKind kind = TokenKind::kEnd;
  std::string text;  // names, operators; a string's decoded value
  int64_t int_value = 0;
  double float_value = 0;
  SourcePos pos;
  bool line_start = false;  // first token of its logical line
  int indent = 0;           // columns before it, when line_start
};

// The tokens of `source`, ending with kNewline (if any line) and kEnd.
// INVALID_ARGUMENT with line, column and caret for a character outside the
// language, an unterminated string, an integer literal beyond int64,
// unbalanced brackets, and mixed tabs and spaces in indentation.
absl::StatusOr<std::vector<Token>> Tokenize(absl::string_view source);

}  // namespace program
}  // namespace shardmap

#endif  // SHARDMAP_PROGRAM_LEXER_H_
