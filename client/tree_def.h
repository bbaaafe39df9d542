// Pytree structures (v1::TreeNode, JAX's PyTreeDef) for jobs: their leaves'
// paths, JAX's tree-prefix matching of specs onto arguments and results,
// and dict trees built from '/'-separated keys (an .npz's members).
//
// A leaf's key path is JAX's keystr: "[0]['linear1']['kernel']"; its rule
// path is the same keys joined by '/': "0/linear1/kernel" (what TreeRule
// filters match, client/tree_rules.h).
//
// Pure functions; thread-safe.
#ifndef SHARDMAP_CLIENT_TREE_DEF_H_
#define SHARDMAP_CLIENT_TREE_DEF_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "shardmap/v1/common.pb.h"

namespace shardmap {

struct TreeLeafPath {
  std::string key;   // JAX's keystr, e.g. "[0]['w']"
  std::string path;  // '/'-joined, e.g. "0/w"
};

// Nodes and depth a tree may have (a request's tree is bounded before
// anything walks it).
inline constexpr int kMaxTreeDepth = 64;
inline constexpr int kMaxTreeNodes = 1 << 20;

// INVALID_ARGUMENT naming `what` (e.g. "arg_tree") and the key path for a
// leaf or None with children, a dict whose keys are not one per child or
// not strictly increasing, or a tree deeper or larger than the bounds.
absl::Status ValidateTree(const v1::TreeNode& tree, absl::string_view what);

// Number of leaves (TREE_LEAF nodes).
size_t CountTreeLeaves(const v1::TreeNode& tree);

// Every leaf's paths, in order.
std::vector<TreeLeafPath> TreeLeafPaths(const v1::TreeNode& tree);

// JAX's broadcast_prefix(prefix, full, is_leaf=None): for every leaf of
// `full`, in order, the index (in leaf order) of the prefix leaf above it,
// or -1 when that is a TREE_NONE of `prefix` (the None spec). INVALID_-
// ARGUMENT in JAX's wording ("pytree structure error: different types at
// key path\n    shard_map in_specs[0]..."), where `name` is the prefix's
// name ("shard_map in_specs").
absl::StatusOr<std::vector<int>> BroadcastTreePrefix(const v1::TreeNode& prefix,
                                                     const v1::TreeNode& full,
                                                     absl::string_view name);

v1::TreeNode TreeLeafNode();
// A tuple of `n` leaves.
v1::TreeNode TreeTupleOfLeaves(size_t n);

// The dict tree of '/'-separated keys ("mlp/w" -> {'mlp': {'w': *}}), and
// through *order the keys' indices in the tree's leaf order (sorted by
// key at every level, as JAX flattens dicts). INVALID_ARGUMENT naming the
// key for an empty key or component, a key given twice, or a key that is
// both a leaf and a parent ("a" and "a/b").
absl::StatusOr<v1::TreeNode> DictTreeFromKeys(
    const std::vector<std::string>& keys, std::vector<size_t>* order);

}  // namespace shardmap

#endif  // SHARDMAP_CLIENT_TREE_DEF_H_
