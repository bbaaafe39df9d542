// The syntax tree of an expression program, as the parser
// (program/parser.h) builds it and the checker reads it.
#ifndef SHARDMAP_PROGRAM_AST_H_
#define SHARDMAP_PROGRAM_AST_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "program/ir.h"

namespace shardmap {
namespace program {

enum class ExprKind {
  kName,       // text
  kAttribute,  // args[0].text
  kInt,        // int_value
  kFloat,      // float_value
  kString,     // text
  kBool,       // int_value 0/1
  kNone,
  kEllipsis,
  kTuple,      // args
  kList,       // args
  kCall,       // args[0](args[1..], keywords)
  kSubscript,  // args[0][args[1]]; several indices arrive as a kTuple
  kSlice,      // args[0]:args[1]:args[2], each possibly null
  kBinary,     // args[0] text args[1]; text is the operator ("+", "@", ...)
  kUnary,      // text ("-", "+", "~", "not") args[0]
  kCompare,    // args[0] text args[1] (chains are refused by the parser)
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Keyword {
  std::string name;
  SourcePos pos;
  ExprPtr value;
};

struct Expr {
  ExprKind kind = ExprKind::kNone;
  SourcePos pos;
  std::string text;
  int64_t int_value = 0;
  double float_value = 0;
  std::vector<ExprPtr> args;  // null entries only in kSlice
  std::vector<Keyword> keywords;
};

// `targets = value` (one name, or several for tuple unpacking) or the
// final `return value`.
struct Statement {
  bool is_return = false;
  SourcePos pos;
  std::vector<std::string> targets;
  std::vector<SourcePos> target_pos;
  ExprPtr value;
};

struct FunctionAst {
  std::string name;  // "lambda" for a lambda
  std::vector<std::string> params;
  std::vector<SourcePos> param_pos;
  std::vector<Statement> body;  // a lambda: one return
};

}  // namespace program
}  // namespace shardmap

#endif  // SHARDMAP_PROGRAM_AST_H_
