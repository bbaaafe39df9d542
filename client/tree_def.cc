#include "client/tree_def.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/status_util.h"

namespace shardmap {
namespace {


bool IsContainer(const v1::TreeNode& t) {
  return t.kind() == v1::TreeNode::TREE_TUPLE ||
         t.kind() == v1::TreeNode::TREE_LIST ||
         t.kind() == v1::TreeNode::TREE_DICT;
}

// Python's type() of a node as JAX's messages print it.
std::string TypeText(const v1::TreeNode& t) {
  switch (t.kind()) {
    case v1::TreeNode::TREE_NONE:
      return "<class 'NoneType'>";
    case v1::TreeNode::TREE_TUPLE:
      return "<class 'tuple'>";
    case v1::TreeNode::TREE_LIST:
      return "<class 'list'>";
    case v1::TreeNode::TREE_DICT:
      return "<class 'dict'>";
    default:
      return "<class 'numpy.ndarray'>";
  }
}

// Python's repr of a string key (single quotes, as keystr prints).
std::string KeyRepr(const std::string& key) {
  std::string out = "'";
  for (char c : key) {
    if (c == '\'' || c == '\\') out += '\\';
    out += c;
  }
  return out + "'";
}

std::string ChildKey(const v1::TreeNode& t, int i) {
  return t.kind() == v1::TreeNode::TREE_DICT
             ? absl::StrCat("[", KeyRepr(t.keys(i)), "]")
             : absl::StrCat("[", i, "]");
}

std::string ChildPath(const v1::TreeNode& t, int i) {
  return t.kind() == v1::TreeNode::TREE_DICT ? t.keys(i) : absl::StrCat(i);
}

absl::Status Validate(const v1::TreeNode& t, absl::string_view what,
                      const std::string& key, int depth, int* nodes) {
  if (depth > kMaxTreeDepth || ++*nodes > kMaxTreeNodes) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " is deeper than ", kMaxTreeDepth,
                     " levels or has more than ", kMaxTreeNodes, " nodes"));
  }
  const std::string where = absl::StrCat(what, key);
  if (!IsContainer(t)) {
    if (t.children_size() > 0 || t.keys_size() > 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": a leaf or None has no children or keys"));
    }
    if (!v1::TreeNode::Kind_IsValid(t.kind())) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": unknown node kind ", t.kind()));
    }
    return absl::OkStatus();
  }
  if (t.kind() == v1::TreeNode::TREE_DICT) {
    if (t.keys_size() != t.children_size()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": a dict has ", t.keys_size(), " keys for ",
                       t.children_size(), " children"));
    }
    for (int i = 1; i < t.keys_size(); ++i) {
      if (!(t.keys(i - 1) < t.keys(i))) {
        return absl::InvalidArgumentError(absl::StrCat(
            where,
            ": dict keys must be sorted and unique (as JAX flattens "
            "dicts), but ",
            KeyRepr(t.keys(i - 1)), " comes before ", KeyRepr(t.keys(i))));
      }
    }
  } else if (t.keys_size() > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": only a dict has keys"));
  }
  for (int i = 0; i < t.children_size(); ++i) {
    SHARD_RETURN_IF_ERROR(Validate(t.children(i), what,
                                   absl::StrCat(key, ChildKey(t, i)), depth + 1,
                                   nodes));
  }
  return absl::OkStatus();
}

void CollectPaths(const v1::TreeNode& t, const std::string& key,
                  const std::string& path, std::vector<TreeLeafPath>* out) {
  if (t.kind() == v1::TreeNode::TREE_LEAF) {
    out->push_back({key, path});
    return;
  }
  for (int i = 0; i < t.children_size(); ++i) {
    const std::string p = ChildPath(t, i);
    CollectPaths(t.children(i), absl::StrCat(key, ChildKey(t, i)),
                 path.empty() ? p : absl::StrCat(path, "/", p), out);
  }
}

std::string KeyList(const v1::TreeNode& t) {
  std::vector<std::string> keys;
  for (int i = 0; i < t.children_size(); ++i) keys.push_back(ChildPath(t, i));
  return absl::StrJoin(keys, " ");
}

absl::Status PrefixError(const v1::TreeNode& prefix, const v1::TreeNode& full,
                         absl::string_view name, const std::string& key) {
  const std::string at = absl::StrCat(" at key path\n    ", name, key,
                                      "\nAt that key path, the prefix pytree ",
                                      name, " has a subtree of type");
  if (prefix.kind() != full.kind()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pytree structure error: different types", at, "\n    ",
        TypeText(prefix),
        "\nbut at the same key path the full pytree has a subtree of "
        "different type\n    ",
        TypeText(full), "."));
  }
  if (prefix.kind() != v1::TreeNode::TREE_DICT) {
    const std::string ty =
        prefix.kind() == v1::TreeNode::TREE_LIST ? "list" : "tuple";
    return absl::InvalidArgumentError(absl::StrCat(
        "pytree structure error: different lengths of ", ty, at, " ", ty,
        " of length ", prefix.children_size(),
        ", but the full pytree has a subtree of the same type but of length ",
        full.children_size(), "."));
  }
  const std::string counts = absl::StrCat(
      at, "\n    ", TypeText(prefix), "\nwith ", prefix.children_size(),
      " child keys\n    ", KeyList(prefix),
      "\nbut at the same key path the full pytree has a subtree of the same "
      "type but with ",
      full.children_size(), " child keys\n    ", KeyList(full), "\n");
  if (prefix.children_size() != full.children_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pytree structure error: different numbers of pytree children",
        counts));
  }
  std::vector<std::string> a(prefix.keys().begin(), prefix.keys().end());
  std::vector<std::string> b(full.keys().begin(), full.keys().end());
  std::vector<std::string> diff;
  std::set_symmetric_difference(a.begin(), a.end(), b.begin(), b.end(),
                                std::back_inserter(diff));
  return absl::InvalidArgumentError(
      absl::StrCat("pytree structure error: different pytree keys", counts,
                   "so the symmetric difference on key sets is\n    ",
                   absl::StrJoin(diff, " ")));
}

absl::Status Broadcast(const v1::TreeNode& prefix, const v1::TreeNode& full,
                       absl::string_view name, const std::string& key,
                       int* next, std::vector<int>* out) {
  if (!IsContainer(prefix)) {
    int index = -1;
    if (prefix.kind() == v1::TreeNode::TREE_LEAF) index = (*next)++;
    out->insert(out->end(), CountTreeLeaves(full), index);
    return absl::OkStatus();
  }
  const bool same = prefix.kind() == full.kind() &&
                    prefix.children_size() == full.children_size() &&
                    std::equal(prefix.keys().begin(), prefix.keys().end(),
                               full.keys().begin(), full.keys().end());
  if (!same) return PrefixError(prefix, full, name, key);
  for (int i = 0; i < prefix.children_size(); ++i) {
    SHARD_RETURN_IF_ERROR(Broadcast(prefix.children(i), full.children(i), name,
                                    absl::StrCat(key, ChildKey(prefix, i)),
                                    next, out));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateTree(const v1::TreeNode& tree, absl::string_view what) {
  int nodes = 0;
  return Validate(tree, what, "", 0, &nodes);
}

size_t CountTreeLeaves(const v1::TreeNode& tree) {
  if (tree.kind() == v1::TreeNode::TREE_LEAF) return 1;
  size_t n = 0;
  for (const v1::TreeNode& c : tree.children()) n += CountTreeLeaves(c);
  return n;
}

std::vector<TreeLeafPath> TreeLeafPaths(const v1::TreeNode& tree) {
  std::vector<TreeLeafPath> out;
  CollectPaths(tree, "", "", &out);
  return out;
}

absl::StatusOr<std::vector<int>> BroadcastTreePrefix(const v1::TreeNode& prefix,
                                                     const v1::TreeNode& full,
                                                     absl::string_view name) {
  std::vector<int> out;
  int next = 0;
  SHARD_RETURN_IF_ERROR(Broadcast(prefix, full, name, "", &next, &out));
  return out;
}

v1::TreeNode TreeLeafNode() {
  v1::TreeNode t;
  t.set_kind(v1::TreeNode::TREE_LEAF);
  return t;
}

v1::TreeNode TreeTupleOfLeaves(size_t n) {
  v1::TreeNode t;
  t.set_kind(v1::TreeNode::TREE_TUPLE);
  for (size_t i = 0; i < n; ++i) *t.add_children() = TreeLeafNode();
  return t;
}

namespace {

// A dict node under construction: children by key (sorted), or a leaf.
struct KeyNode {
  bool leaf = false;
  size_t index = 0;
  std::map<std::string, KeyNode> children;
};

void Emit(const KeyNode& n, v1::TreeNode* out, std::vector<size_t>* order) {
  if (n.leaf) {
    out->set_kind(v1::TreeNode::TREE_LEAF);
    order->push_back(n.index);
    return;
  }
  out->set_kind(v1::TreeNode::TREE_DICT);
  for (const auto& [key, child] : n.children) {
    out->add_keys(key);
    Emit(child, out->add_children(), order);
  }
}

}  // namespace

absl::StatusOr<v1::TreeNode> DictTreeFromKeys(
    const std::vector<std::string>& keys, std::vector<size_t>* order) {
  KeyNode root;
  for (size_t i = 0; i < keys.size(); ++i) {
    const std::vector<std::string> parts = absl::StrSplit(keys[i], '/');
    if (parts.size() > static_cast<size_t>(kMaxTreeDepth)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "key '", keys[i], "' is deeper than ", kMaxTreeDepth, " levels"));
    }
    KeyNode* node = &root;
    for (size_t p = 0; p < parts.size(); ++p) {
      if (parts[p].empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("key '", keys[i], "' has an empty path component"));
      }
      if (node->leaf) {
        return absl::InvalidArgumentError(
            absl::StrCat("key '", keys[i], "' is under '",
                         absl::StrJoin(parts.begin(), parts.begin() + p, "/"),
                         "', which is an array itself"));
      }
      node = &node->children[parts[p]];
    }
    if (node->leaf || !node->children.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "key '", keys[i], "' is given twice, or is also a parent of keys"));
    }
    node->leaf = true;
    node->index = i;
  }
  v1::TreeNode tree;
  order->clear();
  Emit(root, &tree, order);
  return tree;
}

}  // namespace shardmap
