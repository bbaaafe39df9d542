#include "client/tree_literal.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "client/tree_def.h"
#include "core/status_util.h"

namespace shardmap {
namespace {

// A node as written, before dict entries are sorted.
struct Node {
  v1::TreeNode::Kind kind = v1::TreeNode::TREE_LEAF;
  std::string leaf;
  std::vector<std::pair<std::string, Node>> children;  // key "" unless dict
};

class Parser {
 public:
  explicit Parser(absl::string_view text) : text_(text) {}

  absl::StatusOr<Node> Parse() {
    SHARD_ASSIGN_OR_RETURN(Node n, Item(0));
    SkipSpace();
    if (pos_ != text_.size()) return Error("unexpected text after the tree");
    return n;
  }

 private:
  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(
        "malformed tree at offset ", pos_, ": ", what, " in \"", text_, "\""));
  }
  void SkipSpace() {
    while (pos_ < text_.size() &&
           absl::ascii_isspace(static_cast<unsigned char>(text_[pos_]))) {
      ++pos_;
    }
  }
  bool Peek(char c) {
    SkipSpace();
    return pos_ < text_.size() && text_[pos_] == c;
  }

  absl::StatusOr<std::string> Quoted() {
    const char q = text_[pos_++];
    std::string out;
    while (pos_ < text_.size() && text_[pos_] != q) {
      if (text_[pos_] == '\\' && pos_ + 1 < text_.size()) ++pos_;
      out += text_[pos_++];
    }
    if (pos_ >= text_.size()) return Error("unterminated string");
    ++pos_;
    return out;
  }

  // A leaf: text up to the next ',' ':' or closing bracket at depth 0.
  absl::StatusOr<Node> Leaf() {
    const size_t start = pos_;
    int depth = 0;
    char quote = 0;
    for (; pos_ < text_.size(); ++pos_) {
      const char c = text_[pos_];
      if (quote != 0) {
        if (c == quote) quote = 0;
      } else if (c == '\'' || c == '"') {
        quote = c;
      } else if (c == '(' || c == '[' || c == '{') {
        ++depth;
      } else if (c == ')' || c == ']' || c == '}') {
        if (depth == 0) break;
        --depth;
      } else if ((c == ',' || c == ':') && depth == 0) {
        break;
      }
    }
    if (quote != 0 || depth != 0) return Error("unbalanced brackets or quotes");
    Node n;
    n.leaf = std::string(
        absl::StripAsciiWhitespace(text_.substr(start, pos_ - start)));
    if (n.leaf.empty()) return Error("expected a value");
    if (n.leaf == "None") n.kind = v1::TreeNode::TREE_NONE;
    return n;
  }

  absl::StatusOr<Node> Item(int depth) {
    if (depth > kMaxTreeDepth) return Error("nested too deeply");
    SkipSpace();
    if (pos_ >= text_.size()) return Error("expected a value");
    const char c = text_[pos_];
    if (c != '(' && c != '[' && c != '{') return Leaf();
    const char close = c == '(' ? ')' : c == '[' ? ']' : '}';
    ++pos_;
    Node n;
    n.kind = c == '('   ? v1::TreeNode::TREE_TUPLE
             : c == '[' ? v1::TreeNode::TREE_LIST
                        : v1::TreeNode::TREE_DICT;
    bool comma = false;
    while (!Peek(close)) {
      std::string key;
      if (n.kind == v1::TreeNode::TREE_DICT) {
        if (!Peek('\'') && !Peek('"')) {
          return Error("a dict key must be a quoted string");
        }
        SHARD_ASSIGN_OR_RETURN(key, Quoted());
        for (const auto& [k, unused] : n.children) {
          if (k == key)
            return Error(absl::StrCat("dict key '", key, "' twice"));
        }
        if (!Peek(':')) return Error("expected ':' after a dict key");
        ++pos_;
      }
      SHARD_ASSIGN_OR_RETURN(Node child, Item(depth + 1));
      n.children.emplace_back(std::move(key), std::move(child));
      comma = false;
      if (Peek(',')) {
        ++pos_;
        comma = true;
      } else if (!Peek(close)) {
        return Error(
            absl::StrCat("expected ',' or '", std::string(1, close), "'"));
      }
    }
    ++pos_;
    // "(x)" is x, as in Python; "(x,)" and "()" are tuples.
    if (n.kind == v1::TreeNode::TREE_TUPLE && n.children.size() == 1 &&
        !comma) {
      return std::move(n.children[0].second);
    }
    return n;
  }

  absl::string_view text_;
  size_t pos_ = 0;
};

void Emit(Node& n, v1::TreeNode* out, std::vector<std::string>* leaves) {
  out->set_kind(n.kind);
  if (n.kind == v1::TreeNode::TREE_LEAF) {
    leaves->push_back(std::move(n.leaf));
    return;
  }
  if (n.kind == v1::TreeNode::TREE_DICT) {
    std::sort(n.children.begin(), n.children.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
  }
  for (auto& [key, child] : n.children) {
    if (n.kind == v1::TreeNode::TREE_DICT) out->add_keys(key);
    Emit(child, out->add_children(), leaves);
  }
}

}  // namespace

absl::StatusOr<TreeLiteral> ParseTreeLiteral(absl::string_view text) {
  Parser parser(text);
  SHARD_ASSIGN_OR_RETURN(Node root, parser.Parse());
  TreeLiteral out;
  Emit(root, &out.tree, &out.leaves);
  return out;
}

}  // namespace shardmap
