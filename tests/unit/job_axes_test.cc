// Tests of the planner's mesh and axes decisions (server/job_axes.h,
// core/manual_axes.h): the mesh and in_specs taken from resident
// arguments (JAX's Infer), and partial-manual jobs (JAX's axis_names /
// auto), each error with JAX's words.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/manual_axes.h"
#include "server/planner.h"
#include "server/resident_index.h"
#include "tests/unit/status_matchers.h"
#include "wire/signature.h"

namespace shardmap {
namespace {

absl::StatusOr<v1::FunctionSignature> Lookup(const std::string& name) {
  if (name == "psum") {
    return Signature("psum", 1)
        .Collective("psum")
        .Kwarg("axes", "axes", "mesh axes")
        .proto();
  }
  if (name == "add") return Signature("add", 2).proto();
  if (name == "prog") {
    v1::FunctionSignature f = Signature("prog", 1).proto();
    f.set_program("lambda x: psum(x, 'y')");
    f.set_num_outputs(-1);
    return f;
  }
  return absl::NotFoundError(absl::StrCat("unknown function '", name, "'"));
}

v1::PartitionSpec SpecProto(const std::string& text) {
  return SpecToProto(*PartitionSpec::Parse(text));
}

class JobAxesTest : public ::testing::Test {
 protected:
  JobAxesTest() : index_([](const std::string&) { return true; }) {
    Put("a", "x=2,y=2", "P('x', 'y')", {4, 4});
    Put("b", "x=2,y=2", "P(None, 'x')", {4, 4});
    Put("line", "x=4", "P('x')", {4, 4});
  }

  void Put(const std::string& name, const std::string& mesh,
           const std::string& spec, Shape shape) {
    ResidentArray a;
    a.name = name;
    a.meta.dtype = DType::kFloat32;
    a.meta.shape = std::move(shape);
    a.mesh = *Mesh::Parse(mesh);
    a.spec = *PartitionSpec::Parse(spec);
    for (int64_t d = 0; d < a.mesh.num_devices(); ++d) {
      a.worker_ids.push_back(absl::StrCat("w", d));
      a.addresses.push_back(absl::StrCat("10.0.0.", d, ":5000"));
    }
    a.version = index_.NextVersion();
    index_.Commit(std::move(a));
  }

  // A job of `function` over resident arrays `names` (no mesh, no
  // in_specs unless added).
  static v1::JobSpec Resident(const std::string& function,
                              const std::vector<std::string>& names,
                              const std::string& out_spec) {
    v1::JobSpec job;
    job.set_function(function);
    for (const std::string& n : names) {
      job.add_args();
      job.add_resident_args(n);
    }
    *job.add_out_specs() = SpecProto(out_spec);
    return job;
  }

  absl::StatusOr<JobPlan> Plan(const v1::JobSpec& job) {
    return PlanJob(job, Lookup, &index_);
  }

  ResidentIndex index_;
};

TEST_F(JobAxesTest, MeshAndSpecsComeFromTheResidentArguments) {
  absl::StatusOr<JobPlan> plan =
      Plan(Resident("add", {"a", "b"}, "P('x', 'y')"));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->mesh.ToString(), "x=2,y=2");
  EXPECT_EQ(plan->args[0].spec.ToString(), "P('x', 'y')");
  EXPECT_EQ(plan->args[1].spec.ToString(), "P(None, 'x')");
  EXPECT_EQ(plan->args[1].layout.block_shape(), (Shape{4, 2}));
}

TEST_F(JobAxesTest, InferMixesWithGivenSpecs) {
  v1::JobSpec job = Resident("add", {"a", "b"}, "P()");
  *job.add_in_specs() = SpecProto("Infer");
  *job.add_in_specs() = SpecProto("P()");
  absl::StatusOr<JobPlan> plan = Plan(job);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->args[0].spec.ToString(), "P('x', 'y')");
  EXPECT_EQ(plan->args[1].spec.ToString(), "P()");
}

TEST_F(JobAxesTest, ResidentArgumentsOnDifferentMeshesNameBoth) {
  EXPECT_TRUE(StatusIs(Plan(Resident("add", {"a", "line"}, "P()")).status(),
                       absl::StatusCode::kInvalidArgument,
                       {"different meshes", "args[0] ('a') is on mesh x=2,y=2",
                        "args[1] ('line') is on mesh x=4"}));
}

TEST_F(JobAxesTest, InferNeedsAResidentArrayOnTheJobsMesh) {
  v1::JobSpec job = Resident("add", {"a", "line"}, "P()");
  *job.mutable_mesh() = MeshToProto(*Mesh::Parse("x=2,y=2"));
  *job.add_in_specs() = SpecProto("P()");
  *job.add_in_specs() = SpecProto("Infer");
  EXPECT_TRUE(StatusIs(
      Plan(job).status(), absl::StatusCode::kInvalidArgument,
      {"in_specs[1] is Infer", "'line'", "mesh x=4", "job's mesh x=2,y=2"}));
  v1::JobSpec file = Resident("add", {"a"}, "P()");
  *file.add_args() = HeaderToProto(DType::kFloat32, {4, 4});
  file.add_resident_args("");
  EXPECT_TRUE(StatusIs(Plan(file).status(), absl::StatusCode::kInvalidArgument,
                       {"in_specs is missing", "args[1] is not"}));
  *file.add_in_specs() = SpecProto("Infer");
  EXPECT_TRUE(StatusIs(Plan(file).status(), absl::StatusCode::kInvalidArgument,
                       {"in_specs[1] is Infer", "args[1] is not a resident"}));
}

TEST_F(JobAxesTest, InferIsNoOutSpec) {
  EXPECT_TRUE(StatusIs(Plan(Resident("add", {"a", "a"}, "Infer")).status(),
                       absl::StatusCode::kInvalidArgument,
                       {"out_specs is Infer"}));
}

TEST_F(JobAxesTest, NoMeshAndNoResidentArgumentIsAClearError) {
  v1::JobSpec job;
  job.set_function("add");
  *job.add_args() = HeaderToProto(DType::kFloat32, {4});
  *job.add_args() = HeaderToProto(DType::kFloat32, {4});
  *job.add_in_specs() = SpecProto("P()");
  *job.add_out_specs() = SpecProto("P()");
  EXPECT_TRUE(StatusIs(Plan(job).status(), absl::StatusCode::kInvalidArgument,
                       {"mesh is missing", "SHARDMAP_MESH"}));
}

TEST(ManualAxesTest, AxisNamesAndAutoAreComplements) {
  const Mesh mesh = *Mesh::Parse("x=2,y=2,z=2");
  EXPECT_EQ(*ResolveManualAxes(mesh, {"z", "x"}, {}),
            (std::vector<std::string>{"x", "z"}));
  EXPECT_EQ(*ResolveManualAxes(mesh, {}, {"y"}),
            (std::vector<std::string>{"x", "z"}));
  EXPECT_EQ(*ResolveManualAxes(mesh, {"x", "z"}, {"y"}),
            (std::vector<std::string>{"x", "z"}));
  EXPECT_TRUE(StatusIs(ResolveManualAxes(mesh, {"x"}, {"y"}).status(),
                       absl::StatusCode::kInvalidArgument,
                       {"must be complements", "'z' is in neither"}));
  EXPECT_TRUE(
      StatusIs(ResolveManualAxes(mesh, {"w"}, {}).status(),
               absl::StatusCode::kInvalidArgument,
               {"jax.shard_map requires axis_names={'w'} to be a subset of "
                "mesh.axis_names={'x', 'y', 'z'}"}));
  EXPECT_TRUE(StatusIs(ResolveManualAxes(mesh, {}, {"x", "y", "z"}).status(),
                       absl::StatusCode::kInvalidArgument,
                       {"at least one axis must be manual"}));
}

TEST_F(JobAxesTest, SpecsMayNameOnlyManualAxes) {
  v1::JobSpec job = Resident("add", {"a", "b"}, "P('x')");
  job.add_axis_names("x");
  EXPECT_TRUE(StatusIs(
      Plan(job).status(), absl::StatusCode::kInvalidArgument,
      {"shard_map in_specs argument must refer to an axis marked as manual "
       "(frozenset({'x'})), but:\n\n  in_specs[0] refers to 'y'\n\nCheck the "
       "in_specs values passed to shard_map."}));
  v1::JobSpec out = Resident("add", {"b", "b"}, "P('y')");
  out.add_auto_axes("y");
  EXPECT_TRUE(StatusIs(Plan(out).status(), absl::StatusCode::kInvalidArgument,
                       {"shard_map out_specs argument must refer to an axis "
                        "marked as manual (frozenset({'x'})), but:\n\n  "
                        "out_specs refers to 'y'"}));
  v1::JobSpec fine = Resident("add", {"b", "b"}, "P(None, 'x')");
  fine.add_auto_axes("y");
  absl::StatusOr<JobPlan> plan = Plan(fine);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->manual_axes, (std::vector<std::string>{"x"}));
}

TEST_F(JobAxesTest, CollectivesMayNameOnlyManualAxes) {
  v1::JobSpec job = Resident("psum", {"b"}, "P(None, 'x')");
  job.add_auto_axes("y");
  job.set_kwargs_json(R"({"axes": "y"})");
  EXPECT_TRUE(StatusIs(Plan(job).status(), absl::StatusCode::kInvalidArgument,
                       {"Found an unbound axis name: y. To fix this, please "
                        "call psum under `jax.shard_map`.",
                        "auto axis"}));
  v1::JobSpec program = Resident("prog", {"b"}, "P(None, 'x')");
  program.add_axis_names("x");
  EXPECT_TRUE(StatusIs(Plan(program).status(),
                       absl::StatusCode::kInvalidArgument,
                       {"Found an unbound axis name: y", "line 1"}));
}

TEST_F(JobAxesTest, AllAxesManualIsTheDefault) {
  v1::JobSpec job = Resident("add", {"a", "a"}, "P('x', 'y')");
  job.add_axis_names("x");
  job.add_axis_names("y");
  absl::StatusOr<JobPlan> plan = Plan(job);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->manual_axes.empty());
}

}  // namespace
}  // namespace shardmap
