// Pytrees and brainstate's state specs through the C++ client library
// against an in-process cluster of real gRPC servers on 127.0.0.1: a dict
// tree of arguments sharded by rules and returned as a tree, JAX's prefix
// error, a read-only state never re-stored, and a state stored back in
// another sharding. References are plain loops in this file.
#include <gtest/gtest.h>

#include "client/shard_client.h"
#include "client/tree_def.h"
#include "client/tree_literal.h"
#include "tests/integration/shared_cluster.h"

namespace shardmap {
namespace {

PartitionSpec Spec(const char* text) { return *PartitionSpec::Parse(text); }

Tensor Iota(DType dtype, Shape shape, double start) {
  Tensor t(dtype, shape);
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    t.data_as<double>()[i] = start + i;
  }
  return t;
}

v1::TreeNode Tree(const char* text) { return ParseTreeLiteral(text)->tree; }

class TreeClusterTest : public SharedClusterTest {
 protected:
  uint64_t Version(ShardClient& c, const std::string& name) {
    auto list = c.List(name);
    EXPECT_TRUE(list.ok() && list->size() == 1u);
    return list.ok() && !list->empty() ? (*list)[0].version() : 0;
  }
};

TEST_F(TreeClusterTest, DictTreeByRulesComesBackAsATree) {
  Tensor b = Iota(DType::kFloat64, {8}, 1),
         w = Iota(DType::kFloat64, {8, 4}, 0);
  JobRequest job;
  job.program = "lambda b, w: (b * 2.0, w + 1.0)";
  job.mesh = *Mesh::Parse("x=2,y=2");
  job.args = {&b, &w};  // the leaves of ({'b': b, 'w': w},), keys sorted
  job.trees.args = Tree("({'b': *, 'w': *},)");
  job.trees.in_rules = {{"w", Spec("P('x', 'y')")}, {"*", Spec("P('x')")}};
  job.trees.outputs = Tree("{'b': *, 'w': *}");
  job.trees.out_rules = {{"w", Spec("P('x', 'y')")}, {"b", Spec("P('x')")}};
  auto result = Client()->Run(job);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_TRUE(result->output_tree.has_value());
  const auto paths = TreeLeafPaths(*result->output_tree);
  ASSERT_EQ(paths.size(), 2u);
  EXPECT_EQ(paths[1].key, "['w']");
  ASSERT_EQ(result->output_specs.size(), 2u);
  EXPECT_EQ(result->output_specs[1].ToString(), "P('x', 'y')");
  ASSERT_EQ(result->outputs.size(), 2u);
  for (int64_t i = 0; i < 8; ++i) {
    EXPECT_EQ(result->outputs[0].data_as<double>()[i], 2.0 * (1 + i));
  }
  for (int64_t i = 0; i < 32; ++i) {
    EXPECT_EQ(result->outputs[1].data_as<double>()[i], i + 1.0);
  }
}

TEST_F(TreeClusterTest, PrefixMismatchIsJaxsStructureError) {
  Tensor b = Iota(DType::kFloat64, {8}, 0), w = Iota(DType::kFloat64, {8}, 0);
  JobRequest job;
  job.program = "lambda b, w: b";
  job.mesh = *Mesh::Parse("x=2");
  job.args = {&b, &w};
  job.trees.args = Tree("([*, *],)");
  job.trees.in_specs = Tree("([P('x')],)");
  job.in_specs = {Spec("P('x')")};
  job.out_specs = {Spec("P('x')")};
  auto result = Client()->Run(job);
  ASSERT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(result.status().message().find(
                "different lengths of list at key path\n    shard_map "
                "in_specs[0]\nAt that key path, the prefix pytree shard_map "
                "in_specs has a subtree of type list of length 1, but the "
                "full pytree has a subtree of the same type but of length 2."),
            std::string::npos)
      << result.status();
}

TEST_F(TreeClusterTest, ReadOnlyStateIsNeverStored) {
  auto client = Client();
  const Mesh mesh = *Mesh::Parse("x=4");
  Tensor w = Iota(DType::kFloat64, {3}, 1);
  ASSERT_TRUE(client->Put("tree/w", w, mesh, Spec("P()")).ok());
  const uint64_t version = Version(*client, "tree/w");
  Tensor data = Iota(DType::kFloat64, {8, 3}, 0);
  JobRequest job;
  job.function = "mul_by_state";
  job.mesh = mesh;
  job.args = {&data};
  job.in_specs = {Spec("P('x')")};
  job.out_specs = {Spec("P('x')")};
  job.states = {{"w", "tree/w", std::nullopt, std::nullopt}};
  auto result = client->Run(job);
  ASSERT_TRUE(result.ok()) << result.status();
  for (int64_t i = 0; i < 24; ++i) {
    EXPECT_EQ(result->outputs[0].data_as<double>()[i], i * (1.0 + i % 3));
  }
  EXPECT_EQ(Version(*client, "tree/w"), version);
  job.states[0].out_spec = Spec("P('x')");
  result = client->Run(job);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Version(*client, "tree/w"), version);
}

TEST_F(TreeClusterTest, StateReadSplitIsStoredReplicated) {
  auto client = Client();
  const Mesh mesh = *Mesh::Parse("x=4");
  Tensor buf = Iota(DType::kFloat64, {8}, 0),
         x = Iota(DType::kFloat64, {8}, 10);
  ASSERT_TRUE(client->Put("tree/buf", buf, mesh, Spec("P('x')")).ok());
  JobRequest job;
  job.function = "accumulate";
  job.mesh = mesh;
  job.args = {&x};
  job.in_specs = {Spec("P('x')")};
  job.out_specs = {Spec("P('x')")};
  job.states = {{"buffer", "tree/buf", Spec("P('x')"), Spec("P()")}};
  auto result = client->Run(job);
  ASSERT_TRUE(result.ok()) << result.status();
  auto list = client->List("tree/buf");
  ASSERT_TRUE(list.ok() && list->size() == 1u);
  EXPECT_EQ(SpecFromProto((*list)[0].spec()).ToString(), "P()");
  auto got = client->Get("tree/buf");
  ASSERT_TRUE(got.ok()) << got.status();
  for (int64_t i = 0; i < 8; ++i) {
    EXPECT_EQ(got->data_as<double>()[i], i + (10.0 + i));
  }
}

}  // namespace
}  // namespace shardmap
