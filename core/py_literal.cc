#include "core/py_literal.h"

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/status_util.h"

namespace shardmap {
namespace {

constexpr int kMaxNesting = 16;

bool IsOneOf(char c, absl::string_view set) {
  return set.find(c) != absl::string_view::npos;
}

// Recursive-descent parser. Errors are plain problem descriptions.
class HeaderParser {
 public:
  explicit HeaderParser(absl::string_view text) : text_(text) {}

  absl::StatusOr<PyDict> ParseDict() {
    PyDict dict;
    if (!Consume('{')) return Error("expected '{'");
    while (!Consume('}')) {
      if (!dict.empty() && !Consume(',')) return Error("expected ',' or '}'");
      if (Consume('}')) break;  // trailing comma
      SHARD_ASSIGN_OR_RETURN(PyValue key, ParseValue(0));
      if (key.kind != PyValue::kString) return Error("expected a string key");
      if (!Consume(':')) return Error("expected ':'");
      SHARD_ASSIGN_OR_RETURN(PyValue value, ParseValue(0));
      dict.emplace_back(std::move(key.text), std::move(value));
    }
    SkipSpace();
    if (pos_ != text_.size()) return Error("unexpected text after '}'");
    return dict;
  }

 private:
  absl::Status Error(absl::string_view what) {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed header dict at offset ", pos_, ": ", what));
  }
  void SkipSpace() {
    while (pos_ < text_.size() && IsOneOf(text_[pos_], " \t\r\n")) ++pos_;
  }
  bool Consume(char c) {
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  absl::StatusOr<PyValue> ParseValue(int depth) {
    if (depth > kMaxNesting) return Error("nested too deeply");
    SkipSpace();
    if (pos_ >= text_.size()) return Error("unexpected end");
    PyValue v;
    const char c = text_[pos_];
    if (c == '\'' || c == '"') {
      v.kind = PyValue::kString;
      for (++pos_; pos_ < text_.size() && text_[pos_] != c; ++pos_) {
        if (text_[pos_] == '\\' && pos_ + 1 < text_.size()) ++pos_;
        v.text.push_back(text_[pos_]);
      }
      if (pos_ >= text_.size()) return Error("unterminated string");
      ++pos_;
      return v;
    }
    if (c == '(' || c == '[') {
      const char close = c == '(' ? ')' : ']';
      v.kind = c == '(' ? PyValue::kTuple : PyValue::kList;
      ++pos_;
      bool comma = false;
      while (!Consume(close)) {
        if (!v.items.empty() && !(comma = Consume(','))) {
          return Error(
              absl::StrCat("expected ',' or '", std::string(1, close), "'"));
        }
        if (Consume(close)) break;  // trailing comma
        SHARD_ASSIGN_OR_RETURN(PyValue item, ParseValue(depth + 1));
        v.items.push_back(std::move(item));
      }
      // "(3)" is the int 3, not a tuple.
      if (v.kind == PyValue::kTuple && v.items.size() == 1 && !comma) {
        PyValue inner = std::move(v.items[0]);
        return inner;
      }
      return v;
    }
    const size_t start = pos_;
    while (pos_ < text_.size() && !IsOneOf(text_[pos_], ",:)]}{([ \t\r\n'\"")) {
      ++pos_;
    }
    if (pos_ == start) {
      return Error(absl::StrCat("unexpected '", std::string(1, c), "'"));
    }
    v.text = std::string(text_.substr(start, pos_ - start));
    if (v.text == "True" || v.text == "False") {
      v.kind = PyValue::kBool;
    } else {
      const size_t digits = v.text[0] == '-' || v.text[0] == '+' ? 1 : 0;
      if (v.text.size() > digits &&
          v.text.find_first_not_of("0123456789", digits) == std::string::npos) {
        v.kind = PyValue::kInt;
      }
    }
    return v;
  }

  absl::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

absl::StatusOr<PyDict> ParsePyDict(absl::string_view text) {
  return HeaderParser(text).ParseDict();
}

}  // namespace shardmap
