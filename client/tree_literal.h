// Pytrees written as Python literals on the command line:
//
//   {'linear1': P(None, 'model'), 'linear2': P('model', None)}   (specs)
//   (P('x'), [P(), None])                                        (specs)
//   {'w1': *, 'w2': *}                                           (a shape)
//
// Containers are tuples "(a, b)" ("(a)" is just a, "(a,)" a tuple), lists
// "[a, b]" and dicts with quoted string keys; None is an empty subtree (or
// the None spec); any other item is a leaf, kept as text: P(...) or
// PartitionSpec(...) with its parentheses, or '*'. Dict entries are sorted
// by key, as JAX flattens them, so leaves come in JAX's order.
//
// Pure functions; thread-safe.
#ifndef SHARDMAP_CLIENT_TREE_LITERAL_H_
#define SHARDMAP_CLIENT_TREE_LITERAL_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "shardmap/v1/common.pb.h"

namespace shardmap {

struct TreeLiteral {
  v1::TreeNode tree;
  std::vector<std::string> leaves;  // each leaf's text, in leaf order
};

// INVALID_ARGUMENT with the offset for unbalanced brackets or quotes, a
// dict key that is not a quoted string or appears twice, a missing ':' or
// ',', text after the tree, or nesting deeper than kMaxTreeDepth.
absl::StatusOr<TreeLiteral> ParseTreeLiteral(absl::string_view text);

}  // namespace shardmap

#endif  // SHARDMAP_CLIENT_TREE_LITERAL_H_
