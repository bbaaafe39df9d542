// The program language's lexer and parser: the grammar, token positions,
// signatures, and every class of syntax error with its line, column and
// caret.
#include <string>

#include "gtest/gtest.h"
#include "program/checker.h"
#include "program/lexer.h"
#include "program/parser.h"
#include "program/source_error.h"

namespace shardmap {
namespace program {
namespace {

std::string ParseError(const std::string& src) {
  auto f = Parse(src);
  if (f.ok()) return "OK";
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument) << src;
  return std::string(f.status().message());
}

TEST(SourceErrorTest, CaretUnderTheColumn) {
  EXPECT_EQ(SourceMessage("a\nxy + z\n", {2, 4}, "oops"),
            "line 2, column 4: oops\n  xy + z\n     ^");
  // Past the end of the line: just after its last character.
  EXPECT_EQ(SourceMessage("ab", {1, 9}, "end"),
            "line 1, column 9: end\n  ab\n    ^");
  // Tabs are kept so the caret lines up.
  EXPECT_EQ(SourceMessage("\tq", {1, 2}, "t"),
            "line 1, column 2: t\n  \tq\n  \t^");
}

TEST(LexerTest, TokensCarryLineAndColumn) {
  auto t = Tokenize("def f(x):\n    return x ** 2.5  # c\n");
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_GE(t->size(), 10u);
  EXPECT_EQ((*t)[0].text, "def");
  EXPECT_TRUE((*t)[0].line_start);
  EXPECT_EQ((*t)[6].kind, TokenKind::kNewline);
  EXPECT_EQ((*t)[7].text, "return");
  EXPECT_EQ((*t)[7].pos.line, 2);
  EXPECT_EQ((*t)[7].pos.column, 5);
  EXPECT_TRUE((*t)[7].line_start);
  EXPECT_EQ((*t)[7].indent, 4);
  EXPECT_EQ((*t)[9].text, "**");
  EXPECT_EQ((*t)[9].pos.column, 14);
  EXPECT_EQ((*t)[10].kind, TokenKind::kFloat);
  EXPECT_DOUBLE_EQ((*t)[10].float_value, 2.5);
  EXPECT_EQ((*t)[11].kind, TokenKind::kNewline);
  EXPECT_EQ(t->back().kind, TokenKind::kEnd);
}

TEST(LexerTest, NewlinesInsideBracketsAndAfterBackslashContinue) {
  auto t = Tokenize("f(a,\n  b) + \\\n c");
  ASSERT_TRUE(t.ok()) << t.status();
  int newlines = 0;
  for (const Token& k : *t) newlines += k.kind == TokenKind::kNewline;
  EXPECT_EQ(newlines, 1);
  EXPECT_EQ((*t)[t->size() - 3].text, "c");
  EXPECT_EQ((*t)[t->size() - 3].pos.line, 3);
}

TEST(ParserTest, LambdaSignature) {
  auto s = ParseSignature("lambda x, w1, w2: psum(relu(x @ w1) @ w2, 'model')");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->name, "lambda");
  EXPECT_EQ(s->params, (std::vector<std::string>{"x", "w1", "w2"}));
  EXPECT_EQ(s->num_outputs, 1);
  auto t = ParseSignature("lambda a, b: (a, b, a + b)");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->num_outputs, 3);
  auto u = ParseSignature("lambda a: a");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->num_outputs, -1);  // a name may hold a tuple
}

TEST(ParserTest, DefWithStatementsDocstringAndTupleReturn) {
  const char* src =
      "# a comment\n"
      "def step(x, w):\n"
      "    \"\"\"A docstring,\n    of two lines.\"\"\"\n"
      "    y = x @ w  # trailing comment\n"
      "\n"
      "    y += 1\n"
      "    a, b = y, (y *\n"
      "        2)\n"
      "    return a, b\n";
  auto f = Parse(src);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->name, "step");
  ASSERT_EQ(f->body.size(), 4u);
  EXPECT_EQ(f->body[1].targets, (std::vector<std::string>{"y"}));
  EXPECT_EQ(f->body[1].value->kind, ExprKind::kBinary);
  EXPECT_EQ(f->body[2].targets, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(f->body[3].is_return);
  EXPECT_EQ(f->body[3].value->kind, ExprKind::kTuple);
  auto s = ParseSignature(src);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->num_outputs, 2);
  // One line.
  EXPECT_EQ(ParseError("def f(x): return x"), "OK");
  EXPECT_EQ(ParseError("def f(x): y = x; return y"), "OK");
}

TEST(ParserTest, PrecedenceAsPython) {
  auto f = Parse("lambda x: -x ** 2 + 3 * x @ x < 1 | x & x");
  ASSERT_TRUE(f.ok()) << f.status();
  const Expr& e = *f->body[0].value;
  ASSERT_EQ(e.kind, ExprKind::kCompare);  // comparisons bind loosest
  const Expr& left = *e.args[0];
  ASSERT_EQ(left.text, "+");
  EXPECT_EQ(left.args[0]->text, "-");  // -(x ** 2)
  EXPECT_EQ(left.args[0]->args[0]->text, "**");
  EXPECT_EQ(left.args[1]->text, "@");  // (3 * x) @ x, left to right
  EXPECT_EQ(left.args[1]->args[0]->text, "*");
  EXPECT_EQ(e.args[1]->text, "|");
  EXPECT_EQ(e.args[1]->args[1]->text, "&");
}

TEST(ParserTest, CallsSubscriptsAndSlices) {
  auto f = Parse(
      "lambda x: jax.lax.psum(x[None, ..., 1:-1:2, ::3, :], "
      "axis_name=('a', 'b'))");
  ASSERT_TRUE(f.ok()) << f.status();
  const Expr& call = *f->body[0].value;
  ASSERT_EQ(call.kind, ExprKind::kCall);
  EXPECT_EQ(call.args[0]->kind, ExprKind::kAttribute);
  EXPECT_EQ(call.args[0]->text, "psum");
  ASSERT_EQ(call.keywords.size(), 1u);
  EXPECT_EQ(call.keywords[0].name, "axis_name");
  const Expr& sub = *call.args[1];
  ASSERT_EQ(sub.kind, ExprKind::kSubscript);
  const Expr& index = *sub.args[1];
  ASSERT_EQ(index.kind, ExprKind::kTuple);
  ASSERT_EQ(index.args.size(), 5u);
  EXPECT_EQ(index.args[0]->kind, ExprKind::kNone);
  EXPECT_EQ(index.args[1]->kind, ExprKind::kEllipsis);
  EXPECT_EQ(index.args[2]->kind, ExprKind::kSlice);
  EXPECT_EQ(index.args[2]->args[1]->kind, ExprKind::kUnary);
  EXPECT_EQ(index.args[3]->args[0], nullptr);
  EXPECT_EQ(index.args[3]->args[2]->int_value, 3);
}

struct SyntaxCase {
  const char* source;
  const char* message;  // the whole message: what, line and caret
};

class SyntaxErrorTest : public testing::TestWithParam<SyntaxCase> {};

TEST_P(SyntaxErrorTest, SaysWhatWasExpectedWithACaret) {
  EXPECT_EQ(ParseError(GetParam().source), GetParam().message);
}

INSTANTIATE_TEST_SUITE_P(
    AllClasses, SyntaxErrorTest,
    testing::Values(
        SyntaxCase{"lambda x: x +",
                   "line 1, column 14: expected an expression, found the end "
                   "of the line\n  lambda x: x +\n               ^"},
        SyntaxCase{"lambda x: (x",
                   "line 1, column 11: '(' is never closed\n  lambda x: (x\n"
                   "            ^"},
        SyntaxCase{"lambda x: x)",
                   "line 1, column 12: unmatched ')'\n  lambda x: x)\n"
                   "             ^"},
        SyntaxCase{"lambda x: 'abc",
                   "line 1, column 11: string is never closed on its line\n"
                   "  lambda x: 'abc\n            ^"},
        SyntaxCase{"lambda x: x $ 2",
                   "line 1, column 13: unexpected character '$'\n"
                   "  lambda x: x $ 2\n              ^"},
        SyntaxCase{"lambda x: 99999999999999999999",
                   "line 1, column 11: integer 99999999999999999999 does not "
                   "fit in 64 bits\n  lambda x: 99999999999999999999\n"
                   "            ^"},
        SyntaxCase{"def f(x):\n    import os\n    return x",
                   "line 2, column 5: not part of the program language: "
                   "imports\n      import os\n      ^"},
        SyntaxCase{"def f(x):\n    for i in x:\n    return x",
                   "line 2, column 5: not part of the program language: "
                   "loops\n      for i in x:\n      ^"},
        SyntaxCase{"lambda x: x if x else x",
                   "line 1, column 13: not part of the program language: "
                   "conditionals (use where(cond, a, b))\n"
                   "  lambda x: x if x else x\n              ^"},
        SyntaxCase{"lambda x: x and x",
                   "line 1, column 13: not part of the program language: "
                   "'and' (use &, | or ~ on bool arrays)\n"
                   "  lambda x: x and x\n              ^"},
        SyntaxCase{"lambda x: lambda y: y",
                   "line 1, column 11: not part of the program language: a "
                   "lambda inside the program\n  lambda x: lambda y: y\n"
                   "            ^"},
        SyntaxCase{"lambda x: {1: x}",
                   "line 1, column 11: not part of the program language: "
                   "dicts and sets\n  lambda x: {1: x}\n            ^"},
        SyntaxCase{"lambda x: 0 < x < 1",
                   "line 1, column 17: not part of the program language: "
                   "chained comparisons (a < b < c)\n"
                   "  lambda x: 0 < x < 1\n                  ^"},
        SyntaxCase{"lambda x: x ^ 1",
                   "line 1, column 13: not part of the program language: the "
                   "'^' operator\n  lambda x: x ^ 1\n              ^"},
        SyntaxCase{"lambda *x: x",
                   "line 1, column 8: not part of the program language: "
                   "*args and **kwargs\n  lambda *x: x\n         ^"},
        SyntaxCase{"lambda x=1: x",
                   "line 1, column 9: not part of the program language: "
                   "default values\n  lambda x=1: x\n          ^"},
        SyntaxCase{"lambda x, x: x",
                   "line 1, column 11: parameter 'x' appears twice\n"
                   "  lambda x, x: x\n            ^"},
        SyntaxCase{"lambda x: f(x=1, 2)",
                   "line 1, column 18: a positional argument cannot follow a "
                   "keyword argument\n  lambda x: f(x=1, 2)\n"
                   "                   ^"},
        SyntaxCase{"lambda x: x, x",
                   "line 1, column 12: a lambda body is one expression: write "
                   "several outputs as a tuple in parentheses\n"
                   "  lambda x: x, x\n             ^"},
        SyntaxCase{"x + 1",
                   "line 1, column 1: expected a program: 'lambda x, ...: "
                   "expr' or 'def f(x, ...):' with a body ending in 'return'\n"
                   "  x + 1\n  ^"},
        SyntaxCase{"def f(x):\n    y = x\n",
                   "line 3, column 1: expected 'return' at the end of f's "
                   "body"},
        SyntaxCase{"def f(x):\n    return x\n    y = x\n",
                   "line 3, column 5: expected the end of the program after "
                   "'return': the return is the body's last statement\n"
                   "      y = x\n      ^"},
        SyntaxCase{"def f(x):\n    y = x\n      return y\n",
                   "line 3, column 7: unexpected indentation: the body is "
                   "indented 4 columns\n        return y\n        ^"},
        SyntaxCase{"def f(x):\nreturn x\n",
                   "line 2, column 1: expected an indented block after 'def "
                   "...:'\n  return x\n  ^"},
        SyntaxCase{"def f(x):\n    return x\ndef g(y):\n    return y\n",
                   "line 3, column 1: expected the end of the program: a "
                   "program is one lambda or one def\n  def g(y):\n  ^"},
        SyntaxCase{"def f(x):\n    x + 1\n    return x\n",
                   "line 2, column 5: expected an assignment 'name = expr' or "
                   "'return expr'\n      x + 1\n      ^"},
        SyntaxCase{"def f(x):\n\t y = x\n\t return y\n",
                   "line 2, column 3: indentation mixes tabs and spaces\n"
                   "  \t y = x\n  \t ^"},
        SyntaxCase{"def f(x) -> int:\n    return x\n",
                   "line 1, column 10: not part of the program language: "
                   "return annotations\n  def f(x) -> int:\n           ^"},
        SyntaxCase{"lambda x: f'{x}'",
                   "line 1, column 11: not part of the program language: "
                   "string prefixes like f'...'\n  lambda x: f'{x}'\n"
                   "            ^"},
        SyntaxCase{"",
                   "line 1, column 1: expected a program: 'lambda x, ...: "
                   "expr' or 'def f(x, ...):'; the source is empty"}));

TEST(ParserTest, NestingIsBounded) {
  // Deeper than kMaxNesting in every recursive form: refused, no crash.
  const int deep = kMaxNesting + 5;
  const std::string parens =
      "lambda x: " + std::string(deep, '(') + "x" + std::string(deep, ')');
  const std::string unary = "lambda x: " + std::string(deep, '-') + "x";
  std::string power = "lambda x: x";
  for (int i = 0; i < deep; ++i) power += " ** x";
  std::string attrs = "lambda x: x";
  for (int i = 0; i < deep; ++i) attrs += ".T";
  std::string calls = "lambda x: ";
  for (int i = 0; i < deep; ++i) calls += "exp(";
  calls += "x" + std::string(deep, ')');
  std::string sum = "lambda x: x";
  for (int i = 0; i < deep; ++i) sum += " + x";
  for (const std::string& src : {parens, unary, power, attrs, calls, sum}) {
    const std::string m = ParseError(src);
    EXPECT_NE(m.find("nested too deeply (more than 100 levels)"),
              std::string::npos)
        << m;
  }
  // Within the bound it parses.
  const int ok = kMaxNesting - 5;
  EXPECT_EQ(ParseError("lambda x: " + std::string(ok, '(') + "x" +
                       std::string(ok, ')')),
            "OK");
  // Very deep brackets stop at the lexer, before any recursion.
  const std::string huge = "lambda x: " + std::string(100000, '[');
  EXPECT_NE(ParseError(huge).find("nested too deeply"), std::string::npos);
}

TEST(ParserTest, SourceSizeLimitIsResourceExhausted) {
  Limits limits;
  limits.max_source_bytes = 16;
  auto s = ParseSignature("lambda x: x + x + x", limits);
  ASSERT_EQ(s.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(s.status().message(),
            "the program's source is 19 bytes, over the limit of 16 bytes "
            "(max_source_bytes)");
}

}  // namespace
}  // namespace program
}  // namespace shardmap
