#include "program/parser.h"

#include <set>

#include "program/parser_internal.h"

namespace shardmap {
namespace program {
namespace parser_internal {

// Python keywords the language leaves out, with what to say about them.
std::string Refused(const std::string& word) {
  if (word == "import" || word == "from") return "imports";
  if (word == "for" || word == "while") return "loops";
  if (word == "if" || word == "else" || word == "elif")
    return "conditionals (use where(cond, a, b))";
  if (word == "and" || word == "or" || word == "not")
    return absl::StrCat("'", word, "' (use &, | or ~ on bool arrays)");
  if (word == "lambda") return "a lambda inside the program";
  if (word == "def" || word == "class") return "nested definitions";
  static const std::set<std::string> kOthers = {
      "with", "try",    "except",   "finally", "raise", "assert",
      "del",  "global", "nonlocal", "yield",   "await", "async",
      "pass", "break",  "continue", "in",      "is",    "return"};
  if (kOthers.count(word)) return absl::StrCat("'", word, "'");
  return "";
}
bool Parser::Enter(SourcePos p, absl::Status* status) {
  if (++depth_ <= kMaxNesting) return true;
  *status = Err(p, absl::StrCat("expression nested too deeply (more than ",
                                kMaxNesting, " levels)"));
  return false;
}

std::string Parser::Describe(const Token& t) {
  switch (t.kind) {
    case TokenKind::kNewline:
      return "the end of the line";
    case TokenKind::kEnd:
      return "the end of the program";
    case TokenKind::kString:
      return "a string";
    default:
      return absl::StrCat("'", t.text, "'");
  }
}

absl::StatusOr<FunctionAst> Parser::Run() {
  FunctionAst f;
  const Token& first = Peek();
  if (IsName("lambda")) {
    Next();
    f.name = "lambda";
    if (auto s = Params(&f, ":"); !s.ok()) return s;
    Statement ret;
    ret.is_return = true;
    ret.pos = Peek().pos;
    auto body = ParseExpr();
    if (!body.ok()) return body.status();
    ret.value = std::move(*body);
    if (IsOp(",")) {
      return Err(Peek().pos,
                 "a lambda body is one expression: write several outputs "
                 "as a tuple in parentheses");
    }
    f.body.push_back(std::move(ret));
    if (auto s = ExpectLineEnd(); !s.ok()) return s;
  } else if (IsName("def")) {
    Next();
    if (Peek().kind != TokenKind::kName || !Refused(Peek().text).empty()) {
      return Err(Peek().pos, "expected the function's name after 'def'");
    }
    f.name = Next().text;
    if (!IsOp("(")) return Err(Peek().pos, "expected '(' after the name");
    Next();
    if (auto s = Params(&f, ")"); !s.ok()) return s;
    if (IsOp("->")) return Err(Peek().pos, NotLanguage("return annotations"));
    if (auto s = Expect(":"); !s.ok()) return s;
    if (auto s = Body(&f, first.indent); !s.ok()) return s;
  } else {
    return Err(first.pos,
               "expected a program: 'lambda x, ...: expr' or 'def f(x, "
               "...):' with a body ending in 'return'");
  }
  if (Peek().kind != TokenKind::kEnd) {
    return Err(Peek().pos,
               "expected the end of the program: a program is one lambda "
               "or one def");
  }
  return f;
}

absl::Status Parser::Expect(absl::string_view op) {
  if (!IsOp(op)) {
    return Err(Peek().pos,
               absl::StrCat("expected '", op, "', found ", Describe(Peek())));
  }
  Next();
  return absl::OkStatus();
}

absl::Status Parser::ExpectLineEnd() {
  if (Peek().kind == TokenKind::kNewline) {
    Next();
    return absl::OkStatus();
  }
  if (Peek().kind == TokenKind::kEnd) return absl::OkStatus();
  return Err(Peek().pos, absl::StrCat("expected the end of the line, found ",
                                      Describe(Peek())));
}

absl::Status Parser::Params(FunctionAst* f, absl::string_view close) {
  std::set<std::string> seen;
  while (!IsOp(close)) {
    const Token& t = Peek();
    if (t.kind == TokenKind::kOp && (t.text == "*" || t.text == "**")) {
      return Err(t.pos, NotLanguage("*args and **kwargs"));
    }
    if (t.kind != TokenKind::kName || !Refused(t.text).empty()) {
      return Err(t.pos, absl::StrCat("expected a parameter name, found ",
                                     Describe(t)));
    }
    if (!seen.insert(t.text).second) {
      return Err(t.pos, absl::StrCat("parameter '", t.text, "' appears twice"));
    }
    f->params.push_back(t.text);
    f->param_pos.push_back(t.pos);
    Next();
    if (IsOp("=")) return Err(Peek().pos, NotLanguage("default values"));
    if (IsOp(":") && close == ")") {
      return Err(Peek().pos, NotLanguage("annotations"));
    }
    if (IsOp(close)) break;
    if (auto s = Expect(","); !s.ok()) return s;
  }
  Next();
  return absl::OkStatus();
}

absl::Status Parser::Body(FunctionAst* f, int def_indent) {
  int indent = -1;
  const bool inline_body = Peek().kind != TokenKind::kNewline;
  if (!inline_body) Next();
  bool docstring_allowed = true;
  while (true) {
    const Token& t = Peek();
    if (t.kind == TokenKind::kEnd) break;
    if (!inline_body) {
      if (!t.line_start) return Err(t.pos, "expected a new line");
      if (indent < 0) {
        if (t.indent <= def_indent) {
          return Err(t.pos, "expected an indented block after 'def ...:'");
        }
        indent = t.indent;
      } else if (t.indent != indent) {
        if (t.indent < indent && !f->body.empty() && f->body.back().is_return) {
          break;  // the program's end; Run() reports what follows
        }
        return Err(t.pos, absl::StrCat("unexpected indentation: the body ",
                                       "is indented ", indent, " columns"));
      }
    }
    if (!f->body.empty() && f->body.back().is_return) {
      return Err(t.pos,
                 "expected the end of the program after 'return': the "
                 "return is the body's last statement");
    }
    if (docstring_allowed && t.kind == TokenKind::kString &&
        (Peek(1).kind == TokenKind::kNewline ||
         Peek(1).kind == TokenKind::kEnd)) {
      Next();
      Next();
      docstring_allowed = false;
      continue;
    }
    docstring_allowed = false;
    if (auto s = Stmt(f); !s.ok()) return s;
    if (IsOp(";")) {
      Next();
      if (Peek().kind != TokenKind::kNewline &&
          Peek().kind != TokenKind::kEnd) {
        continue;
      }
    }
    if (auto s = ExpectLineEnd(); !s.ok()) return s;
    if (inline_body) break;
  }
  if (f->body.empty() || !f->body.back().is_return) {
    return Err(Peek().pos, absl::StrCat("expected 'return' at the end of ",
                                        f->name, "'s body"));
  }
  return absl::OkStatus();
}

absl::Status Parser::Stmt(FunctionAst* f) {
  Statement st;
  st.pos = Peek().pos;
  if (IsName("return")) {
    Next();
    st.is_return = true;
    auto v = ExprList();
    if (!v.ok()) return v.status();
    st.value = std::move(*v);
    f->body.push_back(std::move(st));
    return absl::OkStatus();
  }
  // Targets: name (, name)* followed by '=' or an augmented operator.
  while (true) {
    const Token& t = Peek();
    if (t.kind != TokenKind::kName) break;
    std::string why = Refused(t.text);
    if (!why.empty()) return Err(t.pos, NotLanguage(why));
    if (Peek(1).kind != TokenKind::kOp) break;
    const std::string& op = Peek(1).text;
    if (op != "," && op != "=" &&
        (op.size() < 2 || op.back() != '=' || op == "==" || op == "!=" ||
         op == "<=" || op == ">=")) {
      break;
    }
    st.targets.push_back(t.text);
    st.target_pos.push_back(t.pos);
    Next();
    if (IsOp(",")) {
      Next();
      continue;
    }
    break;
  }
  if (st.targets.empty() || Peek().kind != TokenKind::kOp) {
    return Err(st.pos,
               "expected an assignment 'name = expr' or 'return "
               "expr'");
  }
  const Token op = Next();
  if (op.text != "=") {
    if (st.targets.size() != 1 || op.text == ",") {
      return Err(op.pos, "expected '=' after the names to assign");
    }
    // x += e is x = x + e.
    const std::string bin = op.text.substr(0, op.text.size() - 1);
    auto rhs = ExprList();
    if (!rhs.ok()) return rhs.status();
    auto lhs = std::make_unique<Expr>();
    lhs->kind = ExprKind::kName;
    lhs->text = st.targets[0];
    lhs->pos = st.target_pos[0];
    auto e = std::make_unique<Expr>();
    e->kind = ExprKind::kBinary;
    e->text = bin;
    e->pos = op.pos;
    e->args.push_back(std::move(lhs));
    e->args.push_back(std::move(*rhs));
    st.value = std::move(e);
  } else {
    auto v = ExprList();
    if (!v.ok()) return v.status();
    st.value = std::move(*v);
  }
  if (IsOp("=")) return Err(Peek().pos, NotLanguage("chained assignment"));
  f->body.push_back(std::move(st));
  return absl::OkStatus();
}

absl::StatusOr<ExprPtr> Parser::ExprList() {
  const SourcePos p = Peek().pos;
  auto first = ParseExpr();
  if (!first.ok() || !IsOp(",")) return first;
  auto tuple = std::make_unique<Expr>();
  tuple->kind = ExprKind::kTuple;
  tuple->pos = p;
  tuple->args.push_back(std::move(*first));
  while (IsOp(",")) {
    Next();
    if (Peek().kind == TokenKind::kNewline || Peek().kind == TokenKind::kEnd ||
        IsOp(";")) {
      break;
    }
    auto e = ParseExpr();
    if (!e.ok()) return e.status();
    tuple->args.push_back(std::move(*e));
  }
  return tuple;
}
}  // namespace parser_internal

absl::StatusOr<FunctionAst> Parse(absl::string_view source) {
  auto tokens = Tokenize(source);
  if (!tokens.ok()) return tokens.status();
  if (tokens->size() == 1) {
    return SourceError(source, {1, 1},
                       "expected a program: 'lambda x, ...: expr' or 'def "
                       "f(x, ...):'; the source is empty");
  }
  return parser_internal::Parser(source, std::move(*tokens)).Run();
}

}  // namespace program
}  // namespace shardmap
