// Tests of server/tree_job: a job's pytrees flattened for the planner
// (prefixes, rules, outputs, state rules), and planning errors that name
// tree paths as JAX does.
#include "server/tree_job.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "client/tree_literal.h"
#include "tests/unit/status_matchers.h"
#include "wire/proto_convert.h"
#include "wire/signature.h"

namespace shardmap {
namespace {

absl::StatusOr<v1::FunctionSignature> Lookup(const std::string& name) {
  if (name == "add3") return Signature("add3", 3).proto();
  if (name == "split3") return Signature("split3", 1, 3).proto();
  return absl::NotFoundError(name);
}

v1::TreeNode Tree(const std::string& text) {
  auto t = ParseTreeLiteral(text);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? t->tree : v1::TreeNode();
}

v1::PartitionSpec Spec(const std::string& text) {
  return SpecToProto(*PartitionSpec::Parse(text));
}

// add3 over args ({'b': [8], 'w': [8, 4]}, [8]) on mesh x=2.
v1::JobSpec TreeJobSpec() {
  v1::JobSpec job;
  job.set_function("add3");
  *job.mutable_mesh() = MeshToProto(*Mesh::Parse("x=2"));
  *job.mutable_arg_tree() = Tree("({'b': *, 'w': *}, *)");
  *job.add_args() = HeaderToProto(DType::kFloat32, {8});
  *job.add_args() = HeaderToProto(DType::kFloat32, {8, 4});
  *job.add_args() = HeaderToProto(DType::kFloat32, {8});
  *job.add_out_specs() = Spec("P()");
  return job;
}

std::vector<std::string> FlatSpecs(const TreeJob& t) {
  std::vector<std::string> out;
  for (const auto& s : t.flat.in_specs()) {
    out.push_back(SpecFromProto(s).ToString());
  }
  return out;
}

TEST(TreeJobTest, OneSpecPerArgumentCoversItsTree) {
  v1::JobSpec job = TreeJobSpec();
  *job.add_in_specs() = Spec("P('x')");
  *job.add_in_specs() = Spec("P()");
  auto t = FlattenJobTrees(job);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(FlatSpecs(*t),
            (std::vector<std::string>{"P('x',)", "P('x',)", "P()"}));
  EXPECT_EQ(t->in_spec_names[1], "in_specs[0]");
}

TEST(TreeJobTest, NestedPrefixAndRules) {
  v1::JobSpec job = TreeJobSpec();
  *job.mutable_in_spec_tree() = Tree("({'b': P(), 'w': P(None, 'x')}, P('x'))");
  for (const char* s : {"P()", "P(None, 'x')", "P('x')"}) {
    *job.add_in_specs() = Spec(s);
  }
  auto t = FlattenJobTrees(job);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(FlatSpecs(*t),
            (std::vector<std::string>{"P()", "P(None, 'x')", "P('x',)"}));

  v1::JobSpec ruled = TreeJobSpec();
  v1::TreeRule* r = ruled.add_in_rules();
  r->set_filter("0/w");
  *r->mutable_spec() = Spec("P('x')");
  r = ruled.add_in_rules();
  r->set_filter("*");
  *r->mutable_spec() = Spec("P()");
  t = FlattenJobTrees(ruled);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(FlatSpecs(*t), (std::vector<std::string>{"P()", "P('x',)", "P()"}));
  ruled.mutable_in_rules()->RemoveLast();
  EXPECT_TRUE(StatusIs(FlattenJobTrees(ruled).status(),
                       absl::StatusCode::kInvalidArgument,
                       {"in_rules: args[0]['b']",
                        "no sharding rule matches "
                        "path '0/b'"}));
}

TEST(TreeJobTest, PrefixMismatchNamesTheKeyPath) {
  v1::JobSpec job = TreeJobSpec();
  *job.mutable_in_spec_tree() = Tree("({'w': P()}, P())");
  *job.add_in_specs() = Spec("P()");
  *job.add_in_specs() = Spec("P()");
  EXPECT_TRUE(StatusIs(FlattenJobTrees(job).status(),
                       absl::StatusCode::kInvalidArgument,
                       {"different numbers of pytree children at key path\n"
                        "    shard_map in_specs[0]"}));
}

TEST(TreeJobTest, PlanningErrorsNameTreePaths) {
  v1::JobSpec job = TreeJobSpec();
  *job.add_in_specs() = Spec("P(None, 'x')");  // too long for ['b']
  *job.add_in_specs() = Spec("P()");
  auto t = FlattenJobTrees(job);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(StatusIs(PlanTreeJob(*t, Lookup, nullptr, nullptr).status(),
                       absl::StatusCode::kInvalidArgument,
                       {"in_specs[0]", "args[0]['b']"}));
}

TEST(TreeJobTest, OutTreeLeavesMustMatchTheOutputs) {
  v1::JobSpec job;
  job.set_function("split3");
  *job.mutable_mesh() = MeshToProto(*Mesh::Parse("x=2"));
  *job.add_args() = HeaderToProto(DType::kFloat32, {8});
  *job.add_in_specs() = Spec("P('x')");
  *job.mutable_out_tree() = Tree("{'a': *, 'b': *}");
  *job.add_out_specs() = Spec("P('x')");
  auto t = FlattenJobTrees(job);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(StatusIs(PlanTreeJob(*t, Lookup, nullptr, nullptr).status(),
                       absl::StatusCode::kInvalidArgument,
                       {"out_tree has 2 leaves but split3 has 3 outputs"}));
}

TEST(TreeJobTest, OutputsAreLabelledByTheirPathInOutTree) {
  v1::JobSpec job;
  job.set_function("split3");
  *job.mutable_mesh() = MeshToProto(*Mesh::Parse("x=2"));
  *job.add_args() = HeaderToProto(DType::kFloat32, {8});
  *job.add_in_specs() = Spec("P('x')");
  *job.add_out_specs() = Spec("P('x')");
  auto flat = FlattenJobTrees(job);
  ASSERT_TRUE(flat.ok()) << flat.status();
  EXPECT_TRUE(OutputLabels(*flat).empty());  // no out_tree: numbered
  *job.mutable_out_tree() = Tree("{'b': [*, *], 'a': *}");
  auto t = FlattenJobTrees(job);
  ASSERT_TRUE(t.ok()) << t.status();
  // Leaves in JAX's order (dict keys sorted).
  EXPECT_EQ(OutputLabels(*t), (std::vector<std::string>{
                                  "out['a']", "out['b'][0]", "out['b'][1]"}));
}

TEST(TreeJobTest, StateRulesGiveUnspecifiedStatesASpec) {
  v1::JobSpec job = TreeJobSpec();
  *job.add_in_specs() = Spec("P()");
  v1::StateBinding* b = job.add_states();
  b->set_slot("w");
  b->set_name("weights");
  v1::TreeRule* r = job.add_state_rules();
  r->set_filter("*");
  *r->mutable_spec() = Spec("P('x')");
  auto t = FlattenJobTrees(job);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(SpecFromProto(t->flat.states(0).spec()).ToString(), "P('x',)");
  EXPECT_EQ(t->flat.state_rules_size(), 0);
}

}  // namespace
}  // namespace shardmap
