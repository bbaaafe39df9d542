#include "program/lexer.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "program/source_error.h"

namespace shardmap {
namespace program {
namespace {

bool IsNameStart(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_';
}
bool IsNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Operators, longest first so "**" wins over "*".
constexpr const char* kOps[] = {
    "**=", "//=", "...", "**", "//", "==", "!=", "<=", ">=", "->", "+=",
    "-=",  "*=",  "/=",  "%=", "@=", "&=", "|=", "^=", "<<", ">>", "+",
    "-",   "*",   "/",   "%",  "@",  "(",  ")",  "[",  "]",  "{",  "}",
    ",",   ":",   ".",   "=",  "<",  ">",  "&",  "|",  "~",  "^",  ";"};

class Lexer {
 public:
  explicit Lexer(absl::string_view src) : src_(src) {}

  absl::StatusOr<std::vector<Token>> Run() {
    bool at_line_start = true;
    int indent = 0;
    bool indent_tab = false, indent_space = false;
    while (i_ < src_.size()) {
      const char c = src_[i_];
      if (at_line_start && depth_.empty()) {
        // Measure the indentation of a new logical line.
        indent = 0;
        indent_tab = indent_space = false;
        while (i_ < src_.size() && (src_[i_] == ' ' || src_[i_] == '\t')) {
          (src_[i_] == '\t' ? indent_tab : indent_space) = true;
          Advance();
          ++indent;
        }
        if (i_ >= src_.size()) break;
        const char d = src_[i_];
        if (d == '\n' || d == '\r' || d == '#') {
          SkipToLineEnd();
          continue;  // blank or comment-only line
        }
        if (indent_tab && indent_space) {
          return Error(Pos(), "indentation mixes tabs and spaces");
        }
        at_line_start = false;
        line_start_pending_ = true;
        pending_indent_ = indent;
        continue;
      }
      if (c == ' ' || c == '\t' || c == '\r' || c == '\f') {
        Advance();
      } else if (c == '#') {
        SkipComment();
      } else if (c == '\\') {
        Advance();
        if (i_ < src_.size() && src_[i_] == '\r') Advance();
        if (i_ >= src_.size() || src_[i_] != '\n') {
          return Error(Pos(), "expected a line break after '\\'");
        }
        NewLine();
      } else if (c == '\n') {
        if (depth_.empty() && !tokens_.empty() &&
            tokens_.back().kind != TokenKind::kNewline) {
          Push(TokenKind::kNewline, "", Pos());
        }
        NewLine();
        if (depth_.empty()) at_line_start = true;
      } else if (IsNameStart(c)) {
        const SourcePos p = Pos();
        const size_t b = i_;
        while (i_ < src_.size() && IsNameChar(src_[i_])) Advance();
        if (i_ < src_.size() && (src_[i_] == '\'' || src_[i_] == '"')) {
          return Error(p, absl::StrCat("not part of the program language: ",
                                       "string prefixes like ",
                                       src_.substr(b, i_ - b), "'...'"));
        }
        Push(TokenKind::kName, std::string(src_.substr(b, i_ - b)), p);
      } else if (IsDigit(c) ||
                 (c == '.' && i_ + 1 < src_.size() && IsDigit(src_[i_ + 1]))) {
        absl::Status s = Number();
        if (!s.ok()) return s;
      } else if (c == '\'' || c == '"') {
        absl::Status s = String();
        if (!s.ok()) return s;
      } else {
        absl::Status s = Operator();
        if (!s.ok()) return s;
      }
    }
    if (!depth_.empty()) {
      return Error(depth_.back().pos,
                   absl::StrCat("'", depth_.back().text, "' is never closed"));
    }
    if (!tokens_.empty() && tokens_.back().kind != TokenKind::kNewline) {
      Push(TokenKind::kNewline, "", Pos());
    }
    Push(TokenKind::kEnd, "", Pos());
    return std::move(tokens_);
  }

 private:
  SourcePos Pos() const { return {line_, column_}; }
  void Advance() {
    ++i_;
    ++column_;
  }
  void NewLine() {
    ++i_;
    ++line_;
    column_ = 1;
  }
  void SkipComment() {
    while (i_ < src_.size() && src_[i_] != '\n') Advance();
  }
  void SkipToLineEnd() {
    SkipComment();
    if (i_ < src_.size()) NewLine();
  }
  absl::Status Error(SourcePos p, absl::string_view what) const {
    return SourceError(src_, p, what);
  }
  void Push(TokenKind kind, std::string text, SourcePos p) {
    Token t;
    t.kind = kind;
    t.text = std::move(text);
    t.pos = p;
    if (line_start_pending_ && kind != TokenKind::kNewline) {
      t.line_start = true;
      t.indent = pending_indent_;
      line_start_pending_ = false;
    }
    tokens_.push_back(std::move(t));
  }

  absl::Status Number() {
    const SourcePos p = Pos();
    const size_t b = i_;
    bool is_float = false;
    while (i_ < src_.size() && IsDigit(src_[i_])) Advance();
    if (i_ < src_.size() && src_[i_] == '.') {
      is_float = true;
      Advance();
      while (i_ < src_.size() && IsDigit(src_[i_])) Advance();
    }
    if (i_ < src_.size() && (src_[i_] == 'e' || src_[i_] == 'E')) {
      size_t j = i_ + 1;
      if (j < src_.size() && (src_[j] == '+' || src_[j] == '-')) ++j;
      if (j < src_.size() && IsDigit(src_[j])) {
        is_float = true;
        while (i_ < j) Advance();
        while (i_ < src_.size() && IsDigit(src_[i_])) Advance();
      }
    }
    if (i_ < src_.size() && IsNameChar(src_[i_])) {
      return Error(Pos(),
                   "not part of the program language: this number "
                   "form (only decimal integers and floats)");
    }
    const std::string text(src_.substr(b, i_ - b));
    Push(is_float ? TokenKind::kFloat : TokenKind::kInt, text, p);
    errno = 0;
    if (is_float) {
      tokens_.back().float_value = std::strtod(text.c_str(), nullptr);
    } else {
      if (text.size() > 1 && text[0] == '0') {
        return Error(p, "integer literals cannot start with 0");
      }
      tokens_.back().int_value = std::strtoll(text.c_str(), nullptr, 10);
      if (errno == ERANGE) {
        return Error(
            p, absl::StrCat("integer ", text, " does not fit in 64 bits"));
      }
    }
    return absl::OkStatus();
  }

  absl::Status String() {
    const SourcePos p = Pos();
    const char quote = src_[i_];
    // A triple-quoted string (a docstring) may span lines.
    const std::string triple(3, quote);
    const bool multi = src_.substr(i_, 3) == triple;
    for (int k = multi ? 3 : 1; k > 0; --k) Advance();
    std::string value;
    while (true) {
      if (i_ >= src_.size() || (src_[i_] == '\n' && !multi)) {
        return Error(p, multi ? "string is never closed"
                              : "string is never closed on its line");
      }
      const char c = src_[i_];
      if (multi && src_.substr(i_, 3) == triple) {
        Advance();
        Advance();
        break;
      }
      if (!multi && c == quote) break;
      if (c == '\n') {
        value.push_back(c);
        NewLine();
        continue;
      }
      if (c == '\\') {
        Advance();
        if (i_ >= src_.size() || src_[i_] == '\n') continue;
        value.push_back(src_[i_]);
        Advance();
        continue;
      }
      value.push_back(c);
      Advance();
    }
    Advance();
    Push(TokenKind::kString, std::move(value), p);
    return absl::OkStatus();
  }

  absl::Status Operator() {
    const SourcePos p = Pos();
    for (const char* op : kOps) {
      const absl::string_view o(op);
      if (src_.substr(i_, o.size()) != o) continue;
      for (size_t k = 0; k < o.size(); ++k) Advance();
      if (o == "(" || o == "[" || o == "{") {
        if (depth_.size() >= 200) {
          return Error(p, "brackets nested too deeply (more than 200)");
        }
        Token open;
        open.text = std::string(o);
        open.pos = p;
        depth_.push_back(open);
      } else if (o == ")" || o == "]" || o == "}") {
        const char want = o == ")" ? '(' : o == "]" ? '[' : '{';
        if (depth_.empty() || depth_.back().text[0] != want) {
          return Error(p, absl::StrCat("unmatched '", o, "'"));
        }
        depth_.pop_back();
      }
      Push(TokenKind::kOp, std::string(o), p);
      return absl::OkStatus();
    }
    const unsigned char c = static_cast<unsigned char>(src_[i_]);
    if (c >= 0x80) {
      return Error(p, "only ASCII characters are allowed outside strings");
    }
    return Error(p, absl::StrCat("unexpected character '",
                                 std::string(1, static_cast<char>(c)), "'"));
  }

  absl::string_view src_;
  size_t i_ = 0;
  int line_ = 1;
  int column_ = 1;
  std::vector<Token> depth_;  // open brackets
  std::vector<Token> tokens_;
  bool line_start_pending_ = false;
  int pending_indent_ = 0;
};

}  // namespace

absl::StatusOr<std::vector<Token>> Tokenize(absl::string_view source) {
  return Lexer(source).Run();
}

}  // namespace program
}  // namespace shardmap
