// The parser's class, shared by parser.cc (the function and its
// statements) and parser_expr.cc (expressions). Not for use outside
// program/parser*.cc.
#ifndef SHARDMAP_PROGRAM_PARSER_INTERNAL_H_
#define SHARDMAP_PROGRAM_PARSER_INTERNAL_H_

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "program/ast.h"
#include "program/lexer.h"
#include "program/source_error.h"

namespace shardmap {
namespace program {
namespace parser_internal {

// What to say about a Python keyword the language leaves out ("loops",
// ...); empty for a word that is not one.
std::string Refused(const std::string& word);

class Parser {
 public:
  Parser(absl::string_view src, std::vector<Token> tokens)
      : src_(src), t_(std::move(tokens)) {}

  absl::StatusOr<FunctionAst> Run();

 private:
  const Token& Peek(int k = 0) const {
    return t_[std::min(p_ + k, t_.size() - 1)];
  }
  const Token& Next() {
    const Token& t = t_[p_];
    if (p_ + 1 < t_.size()) ++p_;
    return t;
  }
  bool IsOp(absl::string_view op) const {
    return Peek().kind == TokenKind::kOp && Peek().text == op;
  }
  bool IsName(absl::string_view n) const {
    return Peek().kind == TokenKind::kName && Peek().text == n;
  }
  absl::Status Err(SourcePos p, absl::string_view what) const {
    return SourceError(src_, p, what);
  }
  static std::string NotLanguage(absl::string_view what) {
    return absl::StrCat("not part of the program language: ", what);
  }
  // Enters one level of nesting; false (and *status set) past kMaxNesting.
  bool Enter(SourcePos p, absl::Status* status);
  static std::string Describe(const Token& t);

  // parser.cc
  absl::Status Expect(absl::string_view op);
  absl::Status ExpectLineEnd();
  absl::Status Params(FunctionAst* f, absl::string_view close);
  absl::Status Body(FunctionAst* f, int def_indent);
  absl::Status Stmt(FunctionAst* f);
  absl::StatusOr<ExprPtr> ExprList();

  // parser_expr.cc
  absl::StatusOr<ExprPtr> ParseExpr();
  static ExprPtr Node(ExprKind kind, SourcePos pos, std::string text = "");
  static ExprPtr Binary(ExprKind kind, const Token& op, ExprPtr a, ExprPtr b);
  absl::StatusOr<ExprPtr> Comparison();
  absl::StatusOr<ExprPtr> BinaryLevel(int level);
  absl::StatusOr<ExprPtr> Unary();
  absl::StatusOr<ExprPtr> Power();
  absl::StatusOr<ExprPtr> Postfix();
  absl::Status CallArgs(Expr* call);
  absl::StatusOr<ExprPtr> Subscript();
  absl::StatusOr<ExprPtr> SliceItem();
  absl::StatusOr<ExprPtr> Sequence(ExprKind kind, SourcePos p,
                                   absl::string_view close);
  absl::StatusOr<ExprPtr> Atom();

  absl::string_view src_;
  std::vector<Token> t_;
  size_t p_ = 0;
  int depth_ = 0;
};

}  // namespace parser_internal
}  // namespace program
}  // namespace shardmap

#endif  // SHARDMAP_PROGRAM_PARSER_INTERNAL_H_
