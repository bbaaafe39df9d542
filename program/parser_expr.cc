// The expression half of the parser (program/parser_internal.h): Python's
// precedence from comparisons down to atoms.
#include <set>

#include "program/parser.h"
#include "program/parser_internal.h"

namespace shardmap {
namespace program {
namespace parser_internal {

absl::StatusOr<ExprPtr> Parser::ParseExpr() {
  absl::Status deep;
  if (!Enter(Peek().pos, &deep)) return deep;
  auto e = Comparison();
  --depth_;
  if (!e.ok()) return e;
  if (Peek().kind == TokenKind::kName) {
    std::string why = Refused(Peek().text);
    if (!why.empty()) return Err(Peek().pos, NotLanguage(why));
  }
  return e;
}

ExprPtr Parser::Node(ExprKind kind, SourcePos pos, std::string text) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->pos = pos;
  e->text = std::move(text);
  return e;
}

ExprPtr Parser::Binary(ExprKind kind, const Token& op, ExprPtr a, ExprPtr b) {
  auto e = Node(kind, op.pos, op.text);
  e->args.push_back(std::move(a));
  e->args.push_back(std::move(b));
  return e;
}

absl::StatusOr<ExprPtr> Parser::Comparison() {
  auto left = BinaryLevel(0);
  if (!left.ok()) return left;
  static const std::set<std::string> kCmp = {"<", "<=", ">", ">=", "==", "!="};
  if (Peek().kind == TokenKind::kOp && kCmp.count(Peek().text)) {
    const Token op = Next();
    auto right = BinaryLevel(0);
    if (!right.ok()) return right;
    if (Peek().kind == TokenKind::kOp && kCmp.count(Peek().text)) {
      return Err(Peek().pos, NotLanguage("chained comparisons (a < b < c)"));
    }
    return Binary(ExprKind::kCompare, op, std::move(*left), std::move(*right));
  }
  return left;
}

absl::StatusOr<ExprPtr> Parser::BinaryLevel(int level) {
  static const std::vector<std::set<std::string>> kLevels = {
      {"|"},        {"^"},      {"&"},
      {"<<", ">>"}, {"+", "-"}, {"*", "/", "//", "%", "@"}};
  if (level == static_cast<int>(kLevels.size())) return Unary();
  auto left = BinaryLevel(level + 1);
  if (!left.ok()) return left;
  // Each operator deepens the (left-leaning) tree: it counts as nesting.
  int chain = 0;
  while (Peek().kind == TokenKind::kOp && kLevels[level].count(Peek().text)) {
    const Token op = Next();
    if (op.text == "^" || op.text == "<<" || op.text == ">>") {
      return Err(op.pos,
                 NotLanguage(absl::StrCat("the '", op.text, "' operator")));
    }
    absl::Status deep;
    if (!Enter(op.pos, &deep)) return deep;
    ++chain;
    auto right = BinaryLevel(level + 1);
    if (!right.ok()) return right;
    left = Binary(ExprKind::kBinary, op, std::move(*left), std::move(*right));
  }
  depth_ -= chain;
  return left;
}

absl::StatusOr<ExprPtr> Parser::Unary() {
  if (Peek().kind == TokenKind::kOp &&
      (Peek().text == "-" || Peek().text == "+" || Peek().text == "~")) {
    const Token op = Next();
    absl::Status deep;
    if (!Enter(op.pos, &deep)) return deep;
    auto operand = Unary();
    --depth_;
    if (!operand.ok()) return operand;
    auto e = Node(ExprKind::kUnary, op.pos, op.text);
    e->args.push_back(std::move(*operand));
    return e;
  }
  return Power();
}

absl::StatusOr<ExprPtr> Parser::Power() {
  auto base = Postfix();
  if (!base.ok()) return base;
  if (IsOp("**")) {
    const Token op = Next();
    absl::Status deep;
    if (!Enter(op.pos, &deep)) return deep;
    auto exponent = Unary();  // right-associative, binds -x tighter
    --depth_;
    if (!exponent.ok()) return exponent;
    return Binary(ExprKind::kBinary, op, std::move(*base),
                  std::move(*exponent));
  }
  return base;
}

absl::StatusOr<ExprPtr> Parser::Postfix() {
  auto e = Atom();
  if (!e.ok()) return e;
  ExprPtr cur = std::move(*e);
  int trailers = 0;
  while (true) {
    if (IsOp(".") || IsOp("(") || IsOp("[")) {
      absl::Status deep;
      if (!Enter(Peek().pos, &deep)) return deep;
      ++trailers;
    }
    if (IsOp(".")) {
      Next();
      const Token& n = Peek();
      if (n.kind != TokenKind::kName) {
        return Err(n.pos, absl::StrCat("expected an attribute name after "
                                       "'.', found ",
                                       Describe(n)));
      }
      auto a = Node(ExprKind::kAttribute, n.pos, n.text);
      a->args.push_back(std::move(cur));
      cur = std::move(a);
      Next();
    } else if (IsOp("(")) {
      auto c = Node(ExprKind::kCall, Peek().pos);
      Next();
      c->args.push_back(std::move(cur));
      if (auto s = CallArgs(c.get()); !s.ok()) return s;
      cur = std::move(c);
    } else if (IsOp("[")) {
      auto s = Node(ExprKind::kSubscript, Peek().pos);
      Next();
      s->args.push_back(std::move(cur));
      auto index = Subscript();
      if (!index.ok()) return index.status();
      s->args.push_back(std::move(*index));
      cur = std::move(s);
    } else {
      depth_ -= trailers;
      return cur;
    }
  }
}

absl::Status Parser::CallArgs(Expr* call) {
  bool keywords = false;
  while (!IsOp(")")) {
    if (IsOp("*") || IsOp("**")) {
      return Err(Peek().pos, NotLanguage("*args and **kwargs"));
    }
    if (Peek().kind == TokenKind::kName && Peek(1).kind == TokenKind::kOp &&
        Peek(1).text == "=") {
      Keyword k;
      k.name = Peek().text;
      k.pos = Peek().pos;
      for (const Keyword& o : call->keywords) {
        if (o.name == k.name) {
          return Err(k.pos, absl::StrCat("keyword argument '", k.name,
                                         "' is given twice"));
        }
      }
      Next();
      Next();
      auto v = ParseExpr();
      if (!v.ok()) return v.status();
      k.value = std::move(*v);
      call->keywords.push_back(std::move(k));
      keywords = true;
    } else {
      const SourcePos p = Peek().pos;
      auto v = ParseExpr();
      if (!v.ok()) return v.status();
      if (keywords) {
        return Err(p,
                   "a positional argument cannot follow a keyword "
                   "argument");
      }
      call->args.push_back(std::move(*v));
    }
    if (IsOp(")")) break;
    if (auto s = Expect(","); !s.ok()) return s;
  }
  Next();
  return absl::OkStatus();
}

absl::StatusOr<ExprPtr> Parser::Subscript() {
  const SourcePos p = Peek().pos;
  std::vector<ExprPtr> items;
  bool comma = false;
  while (!IsOp("]")) {
    auto item = SliceItem();
    if (!item.ok()) return item.status();
    items.push_back(std::move(*item));
    if (IsOp("]")) break;
    if (auto s = Expect(","); !s.ok()) return s;
    comma = true;
  }
  Next();
  if (items.empty()) return Err(p, "expected an index inside '[]'");
  if (items.size() == 1 && !comma) return std::move(items[0]);
  auto t = Node(ExprKind::kTuple, p);
  t->args = std::move(items);
  return t;
}

absl::StatusOr<ExprPtr> Parser::SliceItem() {
  const SourcePos p = Peek().pos;
  ExprPtr parts[3];
  int part = 0;
  bool is_slice = false;
  while (true) {
    if (IsOp(":")) {
      Next();
      is_slice = true;
      if (++part > 2) return Err(Peek().pos, "expected ']' or ','");
      continue;
    }
    if (IsOp("]") || IsOp(",")) break;
    if (parts[part]) return Err(Peek().pos, "expected ':', ',' or ']'");
    auto e = ParseExpr();
    if (!e.ok()) return e.status();
    parts[part] = std::move(*e);
  }
  if (!is_slice) return std::move(parts[0]);
  auto s = Node(ExprKind::kSlice, p);
  for (auto& x : parts) s->args.push_back(std::move(x));
  return s;
}

absl::StatusOr<ExprPtr> Parser::Sequence(ExprKind kind, SourcePos p,
                                         absl::string_view close) {
  auto e = Node(kind, p);
  bool comma = false;
  while (!IsOp(close)) {
    auto item = ParseExpr();
    if (!item.ok()) return item.status();
    e->args.push_back(std::move(*item));
    if (IsOp(close)) break;
    if (auto s = Expect(","); !s.ok()) return s;
    comma = true;
  }
  Next();
  if (kind == ExprKind::kTuple && e->args.size() == 1 && !comma) {
    return std::move(e->args[0]);  // parentheses only group
  }
  return e;
}

absl::StatusOr<ExprPtr> Parser::Atom() {
  const Token& t = Peek();
  switch (t.kind) {
    case TokenKind::kInt: {
      auto e = Node(ExprKind::kInt, t.pos);
      e->int_value = t.int_value;
      Next();
      return e;
    }
    case TokenKind::kFloat: {
      auto e = Node(ExprKind::kFloat, t.pos);
      e->float_value = t.float_value;
      Next();
      return e;
    }
    case TokenKind::kString: {
      auto e = Node(ExprKind::kString, t.pos, t.text);
      Next();
      if (Peek().kind == TokenKind::kString) {
        return Err(Peek().pos, NotLanguage("adjacent strings"));
      }
      return e;
    }
    case TokenKind::kName: {
      std::string why = Refused(t.text);
      if (!why.empty()) return Err(t.pos, NotLanguage(why));
      ExprPtr e;
      if (t.text == "True" || t.text == "False") {
        e = Node(ExprKind::kBool, t.pos);
        e->int_value = t.text == "True";
      } else if (t.text == "None") {
        e = Node(ExprKind::kNone, t.pos);
      } else {
        e = Node(ExprKind::kName, t.pos, t.text);
      }
      Next();
      return e;
    }
    case TokenKind::kOp:
      break;
    default:
      return Err(t.pos,
                 absl::StrCat("expected an expression, found ", Describe(t)));
  }
  const SourcePos p = t.pos;
  if (t.text == "(" || t.text == "[") {
    const bool paren = t.text == "(";
    Next();
    // The elements' own ParseExpr counts this level of nesting.
    return Sequence(paren ? ExprKind::kTuple : ExprKind::kList, p,
                    paren ? ")" : "]");
  }
  if (t.text == "...") {
    Next();
    return Node(ExprKind::kEllipsis, p);
  }
  if (t.text == "{") return Err(p, NotLanguage("dicts and sets"));
  return Err(p, absl::StrCat("expected an expression, found ", Describe(t)));
}
}  // namespace parser_internal
}  // namespace program
}  // namespace shardmap
