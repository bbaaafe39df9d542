// Tests of client/tree_def (key paths, JAX's tree-prefix broadcast and its
// error wording, dict trees from '/' keys) and client/tree_literal (trees
// written as Python literals).
#include "client/tree_def.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "client/tree_literal.h"
#include "tests/unit/status_matchers.h"

namespace shardmap {
namespace {

v1::TreeNode Tree(const std::string& text) {
  auto t = ParseTreeLiteral(text);
  EXPECT_TRUE(t.ok()) << text << ": " << t.status();
  return t.ok() ? t->tree : v1::TreeNode();
}

TEST(TreeLiteralTest, DictsAreSortedAndLeavesFollow) {
  auto t = ParseTreeLiteral("{'w': P('x'), 'b': (P(), None), 'a': [*]}");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->tree.kind(), v1::TreeNode::TREE_DICT);
  ASSERT_EQ(t->tree.keys_size(), 3);
  EXPECT_EQ(t->tree.keys(0), "a");
  EXPECT_EQ(t->tree.keys(1), "b");
  EXPECT_EQ(t->tree.keys(2), "w");
  EXPECT_EQ(t->leaves, (std::vector<std::string>{"*", "P()", "P('x')"}));
  EXPECT_EQ(t->tree.children(1).children(1).kind(), v1::TreeNode::TREE_NONE);
}

TEST(TreeLiteralTest, ParenthesesWithoutCommaAreNotATuple) {
  EXPECT_EQ(Tree("(P('x', None))").kind(), v1::TreeNode::TREE_LEAF);
  EXPECT_EQ(Tree("(P('x'),)").kind(), v1::TreeNode::TREE_TUPLE);
  EXPECT_EQ(Tree("()").children_size(), 0);
}

TEST(TreeLiteralTest, Errors) {
  EXPECT_TRUE(StatusIs(ParseTreeLiteral("{w: P()}").status(),
                       absl::StatusCode::kInvalidArgument,
                       {"a dict key must be a quoted string"}));
  EXPECT_TRUE(StatusIs(ParseTreeLiteral("{'w': P(), 'w': P()}").status(),
                       absl::StatusCode::kInvalidArgument, {"'w' twice"}));
  EXPECT_TRUE(StatusIs(ParseTreeLiteral("(P('x'), P()").status(),
                       absl::StatusCode::kInvalidArgument, {"offset"}));
  EXPECT_TRUE(StatusIs(ParseTreeLiteral("P()) x").status(),
                       absl::StatusCode::kInvalidArgument,
                       {"unexpected text after the tree"}));
}

TEST(TreeDefTest, LeafPathsAreKeystrAndSlashPaths) {
  const auto paths = TreeLeafPaths(Tree("(*, {'lin': {'b': *, 'k': *}})"));
  ASSERT_EQ(paths.size(), 3u);
  EXPECT_EQ(paths[0].key, "[0]");
  EXPECT_EQ(paths[0].path, "0");
  EXPECT_EQ(paths[2].key, "[1]['lin']['k']");
  EXPECT_EQ(paths[2].path, "1/lin/k");
}

TEST(TreeDefTest, PrefixLeafCoversItsSubtree) {
  // in_specs (P('x'), P()) over args (a, {'b': b, 'c': [c0, c1]}).
  auto index = BroadcastTreePrefix(Tree("(P('x'), P())"),
                                   Tree("(*, {'b': *, 'c': [*, *]})"),
                                   "shard_map in_specs");
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ(*index, (std::vector<int>{0, 1, 1, 1}));
  // A None spec covers its subtree with -1; a None argument has no leaves.
  index = BroadcastTreePrefix(Tree("(None, P())"), Tree("({'a': *}, None)"),
                              "shard_map in_specs");
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ(*index, (std::vector<int>{-1}));
}

TEST(TreeDefTest, PrefixErrorsUseJaxWording) {
  // JAX's test_tree_prefix_error: a list of 1 against a list of 2.
  EXPECT_TRUE(StatusIs(
      BroadcastTreePrefix(Tree("([P()],)"), Tree("([*, *],)"),
                          "shard_map in_specs")
          .status(),
      absl::StatusCode::kInvalidArgument,
      {"pytree structure error: different lengths of list at key path\n"
       "    shard_map in_specs[0]\nAt that key path, the prefix pytree "
       "shard_map in_specs has a subtree of type list of length 1, but the "
       "full pytree has a subtree of the same type but of length 2."}));
  EXPECT_TRUE(
      StatusIs(BroadcastTreePrefix(Tree("({'w': P()},)"), Tree("((*, *),)"),
                                   "shard_map in_specs")
                   .status(),
               absl::StatusCode::kInvalidArgument,
               {"different types at key path\n    shard_map in_specs[0]\n",
                "<class 'dict'>", "<class 'tuple'>"}));
  EXPECT_TRUE(StatusIs(
      BroadcastTreePrefix(Tree("({'a': P(), 'w': P()},)"),
                          Tree("({'a': *, 'b': *},)"), "shard_map in_specs")
          .status(),
      absl::StatusCode::kInvalidArgument,
      {"different pytree keys at key path\n    shard_map in_specs[0]\n",
       "symmetric difference on key sets is\n    b w"}));
}

TEST(TreeDefTest, ValidateRejectsUnsortedKeysAndLeafChildren) {
  v1::TreeNode t;
  t.set_kind(v1::TreeNode::TREE_DICT);
  t.add_keys("b");
  t.add_keys("a");
  *t.add_children() = TreeLeafNode();
  *t.add_children() = TreeLeafNode();
  EXPECT_TRUE(StatusIs(ValidateTree(t, "arg_tree"),
                       absl::StatusCode::kInvalidArgument,
                       {"arg_tree: dict keys must be sorted"}));
  v1::TreeNode leaf = TreeLeafNode();
  *leaf.add_children() = TreeLeafNode();
  EXPECT_TRUE(StatusIs(ValidateTree(leaf, "out_tree"),
                       absl::StatusCode::kInvalidArgument,
                       {"out_tree: a leaf or None has no children"}));
}

TEST(TreeDefTest, DictTreeFromNpzKeys) {
  std::vector<size_t> order;
  auto t = DictTreeFromKeys({"mlp/w2", "mlp/w1", "b"}, &order);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(order, (std::vector<size_t>{2, 1, 0}));  // b, mlp/w1, mlp/w2
  const auto paths = TreeLeafPaths(*t);
  EXPECT_EQ(paths[1].path, "mlp/w1");
  EXPECT_EQ(paths[1].key, "['mlp']['w1']");
  EXPECT_TRUE(StatusIs(DictTreeFromKeys({"a", "a/b"}, &order).status(),
                       absl::StatusCode::kInvalidArgument, {"'a/b'"}));
  EXPECT_TRUE(StatusIs(DictTreeFromKeys({"a//b"}, &order).status(),
                       absl::StatusCode::kInvalidArgument,
                       {"empty path component"}));
}

}  // namespace
}  // namespace shardmap
