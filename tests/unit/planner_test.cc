// Tests of server/planner: JobSpec protos built by hand, a FunctionLookup
// that knows a few signatures, and every check PlanJob makes before data
// moves (SEMANTICS §3-§5, I5).
#include "server/planner.h"

#include <gtest/gtest.h>

#include <initializer_list>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "server/worker_pool.h"
#include "tests/unit/status_matchers.h"
#include "wire/signature.h"

namespace shardmap {
namespace {

const std::map<std::string, v1::FunctionSignature>& Catalog() {
  static const auto* catalog = [] {
    auto* m = new std::map<std::string, v1::FunctionSignature>;
    for (const Signature& s : {
             Signature("add", 2).SameDType().Doc("x + y"),
             Signature("scale", 1).Kwarg("alpha", "number", "the factor"),
             Signature("sum", 1).Kwarg("axis", "int_or_int_list_or_null",
                                       "null", "axes to reduce"),
             Signature("split2", 1, /*num_outputs=*/2),
             Signature("fma", 3).DTypes({DType::kFloat32, DType::kFloat64}),
         }) {
      (*m)[s.proto().name()] = s.proto();
    }
    return m;
  }();
  return *catalog;
}

absl::StatusOr<v1::FunctionSignature> Lookup(const std::string& name) {
  auto it = Catalog().find(name);
  if (it == Catalog().end()) {
    return absl::NotFoundError(absl::StrCat("unknown function '", name, "'"));
  }
  return it->second;
}

struct Arg {
  DType dtype;
  Shape shape;
};

v1::PartitionSpec Spec(absl::string_view text) {
  absl::StatusOr<PartitionSpec> p = PartitionSpec::Parse(text);
  EXPECT_TRUE(p.ok()) << text << ": " << p.status();
  return SpecToProto(p.ok() ? *p : PartitionSpec());
}

v1::JobSpec Job(const std::string& function, absl::string_view mesh,
                const std::vector<Arg>& args,
                const std::vector<std::string>& in_specs,
                const std::vector<std::string>& out_specs,
                const std::string& kwargs = "") {
  v1::JobSpec job;
  job.set_function(function);
  absl::StatusOr<Mesh> m = Mesh::Parse(mesh);
  EXPECT_TRUE(m.ok()) << m.status();
  if (m.ok()) *job.mutable_mesh() = MeshToProto(*m);
  for (const Arg& a : args) *job.add_args() = HeaderToProto(a.dtype, a.shape);
  for (const std::string& s : in_specs) *job.add_in_specs() = Spec(s);
  for (const std::string& s : out_specs) *job.add_out_specs() = Spec(s);
  job.set_kwargs_json(kwargs);
  return job;
}

constexpr DType kF32 = DType::kFloat32;
constexpr DType kF64 = DType::kFloat64;
constexpr DType kI32 = DType::kInt32;

TEST(PlannerTest, ValidPlan) {
  const v1::JobSpec job =
      Job("add", "x=4,y=2", {{kF32, {8, 6}}, {kF32, {8, 6}}},
          {"P('x', 'y')", "P(('y', 'x'))"}, {"P('x')"});
  absl::StatusOr<JobPlan> plan = PlanJob(job, Lookup);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->mesh.ToString(), "x=4,y=2");
  EXPECT_EQ(plan->function.name(), "add");
  ASSERT_EQ(plan->args.size(), 2u);
  EXPECT_EQ(plan->args[0].meta.dtype, kF32);
  EXPECT_EQ(plan->args[0].meta.shape, (Shape{8, 6}));
  EXPECT_EQ(plan->args[0].spec.ToString(), "P('x', 'y')");
  EXPECT_EQ(plan->args[0].layout.block_shape(), (Shape{2, 3}));
  EXPECT_EQ(plan->args[0].layout.blocks_per_dim(),
            (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(plan->args[1].spec.ToString(), "P(('y', 'x'),)");
  EXPECT_EQ(plan->args[1].layout.block_shape(), (Shape{1, 6}));
  // Device 1 = (x=0, y=1): block 1*4 + 0 = 4 along dim 0 for ('y', 'x').
  EXPECT_EQ(plan->args[1].layout.BlockIndex(1), (std::vector<int64_t>{4, 0}));
  EXPECT_EQ(plan->input_bytes(), 2u * 8 * 6 * 4);
  ASSERT_EQ(plan->out_specs.size(), 1u);
  EXPECT_EQ(plan->out_specs[0].ToString(), "P('x',)");
  EXPECT_EQ(plan->kwargs_json, "{}");
  EXPECT_TRUE(plan->check_rep);
}

TEST(PlannerTest, NoCheckRep) {
  v1::JobSpec job = Job("scale", "x=2", {{kF64, {4}}}, {"P('x')"}, {"P('x')"},
                        R"({"alpha": 2.5})");
  job.set_no_check_rep(true);
  absl::StatusOr<JobPlan> plan = PlanJob(job, Lookup);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_FALSE(plan->check_rep);
  EXPECT_EQ(plan->kwargs_json, R"({"alpha":2.5})");
  EXPECT_EQ(plan->input_bytes(), 32u);
}

TEST(PlannerTest, OneOutSpecBroadcastsToAllOutputs) {
  absl::StatusOr<JobPlan> plan = PlanJob(
      Job("split2", "x=2,y=2", {{kF32, {4, 4}}}, {"P('x')"}, {"P(None, 'y')"}),
      Lookup);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->out_specs.size(), 2u);
  EXPECT_EQ(plan->out_specs[0].ToString(), "P(None, 'y')");
  EXPECT_EQ(plan->out_specs[1].ToString(), "P(None, 'y')");

  // Or one per output.
  plan = PlanJob(
      Job("split2", "x=2,y=2", {{kF32, {4, 4}}}, {"P('x')"}, {"P('x')", "P()"}),
      Lookup);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->out_specs[0].ToString(), "P('x',)");
  EXPECT_EQ(plan->out_specs[1].ToString(), "P()");
}

TEST(PlannerTest, KwargDefaultsAreFilledIn) {
  absl::StatusOr<JobPlan> plan =
      PlanJob(Job("sum", "x=2", {{kI32, {4, 2}}}, {"P('x')"}, {"P()"}), Lookup);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->kwargs_json, R"({"axis":null})");

  plan = PlanJob(
      Job("sum", "x=2", {{kI32, {4, 2}}}, {"P('x')"}, {"P()"}, R"({"axis":1})"),
      Lookup);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->kwargs_json, R"({"axis":1})");
}

TEST(PlannerTest, OneInSpecAppliesToAllArgs) {
  absl::StatusOr<JobPlan> plan = PlanJob(
      Job("fma", "x=2,y=3", {{kF32, {6, 2}}, {kF32, {6, 9}}, {kF32, {12}}},
          {"P(('x', 'y'))"}, {"P(('x', 'y'))"}),
      Lookup);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->args.size(), 3u);
  for (const ArgPlan& a : plan->args) {
    EXPECT_EQ(a.spec.ToString(), "P(('x', 'y'),)");
  }
  EXPECT_EQ(plan->args[0].layout.block_shape(), (Shape{1, 2}));
  EXPECT_EQ(plan->args[1].layout.block_shape(), (Shape{1, 9}));
  EXPECT_EQ(plan->args[2].layout.block_shape(), (Shape{2}));
  EXPECT_EQ(plan->input_bytes(), (12u + 54u + 12u) * 4);
}

TEST(PlannerTest, UnsplitInSpecGivesWholeArrayBlocks) {
  absl::StatusOr<JobPlan> plan =
      PlanJob(Job("add", "x=3", {{kF32, {3, 5}}, {kF32, {7}}},
                  {"P('x')", "None"}, {"P('x')"}),
              Lookup);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->args[1].spec.unsplit());
  EXPECT_EQ(plan->args[1].layout.block_shape(), (Shape{7}));
  EXPECT_EQ(plan->args[1].layout.global_shape(), (Shape{7}));
  for (int64_t d = 0; d < 3; ++d) {
    EXPECT_EQ(plan->args[1].layout.BlockNumber(d), 0);
    EXPECT_EQ(plan->args[1].layout.BlockOrigin(d), (std::vector<int64_t>{0}));
  }
  EXPECT_EQ(plan->args[0].layout.block_shape(), (Shape{1, 5}));

  // A None in_spec is not checked against the rank: scalars are fine.
  plan = PlanJob(
      Job("scale", "x=3", {{kF32, {}}}, {"None"}, {"P()"}, R"({"alpha":1})"),
      Lookup);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->args[0].layout.block_shape(), Shape{});
}

TEST(PlannerTest, IsOutputRepresentative) {
  // Mesh x=2,y=3,z=2 (12 devices); device id = 6x + 2y + z.
  absl::StatusOr<JobPlan> plan =
      PlanJob(Job("split2", "x=2,y=3,z=2", {{kF32, {6}}}, {"P('y')"},
                  {"P('y')", "P()"}),
              Lookup);
  ASSERT_TRUE(plan.ok()) << plan.status();
  for (int64_t x = 0; x < 2; ++x) {
    for (int64_t y = 0; y < 3; ++y) {
      for (int64_t z = 0; z < 2; ++z) {
        const int64_t dev = 6 * x + 2 * y + z;
        // Output 0 mentions y: representatives have x == 0 and z == 0.
        EXPECT_EQ(plan->IsOutputRepresentative(0, dev), x == 0 && z == 0)
            << dev;
        // Output 1 mentions nothing: only device 0.
        EXPECT_EQ(plan->IsOutputRepresentative(1, dev), dev == 0) << dev;
      }
    }
  }

  plan = PlanJob(Job("split2", "x=2,y=2", {{kF32, {4}}}, {"P('x')"},
                     {"P(('y', 'x'))", "P(None, 'x')"}),
                 Lookup);
  ASSERT_TRUE(plan.ok()) << plan.status();
  for (int64_t dev = 0; dev < 4; ++dev) {
    EXPECT_TRUE(plan->IsOutputRepresentative(0, dev)) << dev;
    EXPECT_EQ(plan->IsOutputRepresentative(1, dev), dev % 2 == 0) << dev;
  }
}

// --- Errors
// -------------------------------------------------------------------

TEST(PlannerErrorTest, UnknownFunctionListsKnownNames) {
  // The coordinator's real lookup is the worker pool's catalog.
  WorkerPool pool(WorkerPool::Options{});
  ASSERT_TRUE(pool.Register("127.0.0.1:1", 1,
                            {Catalog().at("add"), Catalog().at("scale")})
                  .ok());
  const FunctionLookup lookup = [&pool](const std::string& name) {
    return pool.FindFunction(name);
  };
  EXPECT_TRUE(StatusIs(
      PlanJob(Job("mul", "x=2", {{kF32, {2}}}, {"P('x')"}, {"P('x')"}), lookup)
          .status(),
      absl::StatusCode::kNotFound, {"unknown function 'mul'", "add, scale"}));
  // With the lambda lookup, its status passes through unchanged.
  EXPECT_EQ(PlanJob(Job("nope", "x=2", {}, {}, {"P()"}), Lookup).status(),
            absl::NotFoundError("unknown function 'nope'"));
}

TEST(PlannerErrorTest, WrongArgCount) {
  EXPECT_TRUE(StatusIs(
      PlanJob(Job("add", "x=2", {{kF32, {2}}}, {"P('x')"}, {"P('x')"}), Lookup)
          .status(),
      absl::StatusCode::kInvalidArgument,
      {"add(x, y) takes 2 positional arguments but 1 was given"}));
  EXPECT_TRUE(StatusIs(
      PlanJob(Job("scale", "x=2", {{kF32, {2}}, {kF32, {2}}, {kF32, {2}}},
                  {"P('x')"}, {"P('x')"}, R"({"alpha":1})"),
              Lookup)
          .status(),
      absl::StatusCode::kInvalidArgument,
      {"scale(x; alpha) takes 1 positional argument but 3 were given"}));
}

TEST(PlannerErrorTest, InSpecsCountMismatch) {
  EXPECT_TRUE(StatusIs(
      PlanJob(Job("fma", "x=2", {{kF32, {2}}, {kF32, {2}}, {kF32, {2}}},
                  {"P('x')", "P()"}, {"P('x')"}),
              Lookup)
          .status(),
      absl::StatusCode::kInvalidArgument,
      {"in_specs has 2 entries but there are 3 arguments; give one spec for "
       "all of them or exactly one per argument"}));
}

TEST(PlannerErrorTest, OutSpecsCountMismatch) {
  EXPECT_TRUE(StatusIs(
      PlanJob(Job("add", "x=2", {{kF32, {2}}, {kF32, {2}}}, {"P('x')"},
                  {"P('x')", "P()"}),
              Lookup)
          .status(),
      absl::StatusCode::kInvalidArgument,
      {"out_specs has 2 entries but there is 1 output; give one spec for all "
       "of them or exactly one per output"}));
  EXPECT_TRUE(StatusIs(PlanJob(Job("split2", "x=2", {{kF32, {4}}}, {"P('x')"},
                                   {"P('x')", "P()", "P()"}),
                               Lookup)
                           .status(),
                       absl::StatusCode::kInvalidArgument,
                       {"out_specs has 3 entries but there are 2 outputs;"}));
}

TEST(PlannerErrorTest, MissingSpecs) {
  EXPECT_TRUE(StatusIs(
      PlanJob(Job("add", "x=2", {{kF32, {2}}, {kF32, {2}}}, {}, {"P('x')"}),
              Lookup)
          .status(),
      absl::StatusCode::kInvalidArgument, {"in_specs is missing"}));
  EXPECT_TRUE(StatusIs(
      PlanJob(Job("add", "x=2", {{kF32, {2}}, {kF32, {2}}}, {"P('x')"}, {}),
              Lookup)
          .status(),
      absl::StatusCode::kInvalidArgument, {"out_specs is missing"}));
}

TEST(PlannerErrorTest, UnknownAxisInInSpec) {
  EXPECT_TRUE(StatusIs(PlanJob(Job("add", "x=2,y=2", {{kF32, {4}}, {kF32, {4}}},
                                   {"P('x')", "P('k')"}, {"P('x')"}),
                               Lookup)
                           .status(),
                       absl::StatusCode::kInvalidArgument,
                       {"in_specs[1] is P('k',)", "mesh axis 'k'",
                        "the mesh has axes ('x', 'y')"}));
  // A single spec for all arguments is named "in_specs".
  EXPECT_TRUE(StatusIs(
      PlanJob(
          Job("add", "x=2", {{kF32, {4}}, {kF32, {4}}}, {"P('k')"}, {"P('x')"}),
          Lookup)
          .status(),
      absl::StatusCode::kInvalidArgument, {"in_specs is P('k',)"}));
}

TEST(PlannerErrorTest, UnknownAxisInOutSpec) {
  EXPECT_TRUE(
      StatusIs(PlanJob(Job("add", "x=2,y=2", {{kF32, {4}}, {kF32, {4}}},
                           {"P('x')"}, {"P(('x', 'q'))"}),
                       Lookup)
                   .status(),
               absl::StatusCode::kInvalidArgument,
               {"out_specs is P(('x', 'q'),)", "mesh axis 'q'", "('x', 'y')"}));
  EXPECT_TRUE(StatusIs(
      PlanJob(
          Job("split2", "x=2", {{kF32, {4}}}, {"P('x')"}, {"P('x')", "P('q')"}),
          Lookup)
          .status(),
      absl::StatusCode::kInvalidArgument, {"out_specs[1] is P('q',)"}));
}

TEST(PlannerErrorTest, DuplicateAxis) {
  EXPECT_TRUE(
      StatusIs(PlanJob(Job("add", "x=2,y=2", {{kF32, {4, 4}}, {kF32, {4, 4}}},
                           {"P('x', 'y')", "P(('x', 'y'), 'x')"}, {"P('x')"}),
                       Lookup)
                   .status(),
               absl::StatusCode::kInvalidArgument,
               {"in_specs[1]", "duplicate entries for mesh axis 'x'"}));
  EXPECT_TRUE(StatusIs(
      PlanJob(Job("add", "x=2,y=2", {{kF32, {4, 4}}, {kF32, {4, 4}}},
                  {"P('x')"}, {"P('y', 'y')"}),
              Lookup)
          .status(),
      absl::StatusCode::kInvalidArgument,
      {"out_specs is P('y', 'y')", "duplicate entries for mesh axis 'y'"}));
}

TEST(PlannerErrorTest, SpecLongerThanRank) {
  EXPECT_TRUE(StatusIs(PlanJob(Job("add", "i=4,j=2", {{kI32, {8}}, {kI32, {8}}},
                                   {"P('i', 'j')"}, {"P('i')"}),
                               Lookup)
                           .status(),
                       absl::StatusCode::kInvalidArgument,
                       {"in_specs is P('i', 'j') which has length 2", "args[0]",
                        "int32[8]", "rank 1", "(and 1 < 2)"}));
  EXPECT_TRUE(StatusIs(PlanJob(Job("scale", "i=4", {{kF32, {}}}, {"P('i')"},
                                   {"P()"}, R"({"alpha":1})"),
                               Lookup)
                           .status(),
                       absl::StatusCode::kInvalidArgument,
                       {"rank 0", "for scalar values (rank 0) use P()"}));
}

TEST(PlannerErrorTest, NonDivisibleDim) {
  EXPECT_TRUE(
      StatusIs(PlanJob(Job("add", "x=4,y=2", {{kF32, {8, 8}}, {kF32, {8, 6}}},
                           {"P('x')", "P(None, ('x', 'y'))"}, {"P('x')"}),
                       Lookup)
                   .status(),
               absl::StatusCode::kInvalidArgument,
               {"args[1]", "in_specs[1]", "array axis 1 (of size 6)",
                "mesh axes ('x', 'y') (of total size 8)",
                "8 does not evenly divide 6"}));
  EXPECT_TRUE(StatusIs(
      PlanJob(Job("add", "i=4,j=2", {{kI32, {2, 2}}, {kI32, {2, 2}}},
                  {"P('i')"}, {"P('i')"}),
              Lookup)
          .status(),
      absl::StatusCode::kInvalidArgument,
      {"args[0]", "array axis 0 (of size 2) to mesh axis 'i' (of size 4)",
       "4 does not evenly divide 2"}));
}

TEST(PlannerErrorTest, DTypeMismatchForSameDType) {
  EXPECT_TRUE(StatusIs(PlanJob(Job("add", "x=2", {{kF32, {4}}, {kI32, {4}}},
                                   {"P('x')"}, {"P('x')"}),
                               Lookup)
                           .status(),
                       absl::StatusCode::kInvalidArgument,
                       {"add needs all arguments to have one dtype",
                        "args[0] is float32", "args[1] is int32"}));
}

TEST(PlannerErrorTest, DTypeNotAccepted) {
  EXPECT_TRUE(StatusIs(
      PlanJob(Job("fma", "x=2", {{kF32, {4}}, {kF32, {4}}, {kI32, {4}}},
                  {"P('x')"}, {"P('x')"}),
              Lookup)
          .status(),
      absl::StatusCode::kInvalidArgument,
      {"fma: args[2] has dtype int32", "float32, float64"}));
}

TEST(PlannerErrorTest, KwargErrors) {
  auto plan = [](const std::string& fn, const std::string& kwargs) {
    return PlanJob(
               Job(fn, "x=2", {{kF32, {4}}}, {"P('x')"}, {"P('x')"}, kwargs),
               Lookup)
        .status();
  };
  EXPECT_TRUE(StatusIs(
      plan("scale", R"({"alpha": 2, "beta": 1})"),
      absl::StatusCode::kInvalidArgument,
      {"scale got an unexpected keyword argument 'beta'", "it takes alpha"}));
  EXPECT_TRUE(StatusIs(plan("scale", ""), absl::StatusCode::kInvalidArgument,
                       {"scale is missing the required keyword argument "
                        "'alpha'"}));
  EXPECT_TRUE(StatusIs(plan("scale", "{}"), absl::StatusCode::kInvalidArgument,
                       {"missing the required keyword argument 'alpha'"}));
  EXPECT_TRUE(StatusIs(plan("scale", R"({"alpha": "big"})"),
                       absl::StatusCode::kInvalidArgument,
                       {"scale: keyword argument 'alpha' must be a JSON "
                        "number, got \"big\""}));
  EXPECT_TRUE(StatusIs(plan("sum", R"({"axis": 1.5})"),
                       absl::StatusCode::kInvalidArgument,
                       {"keyword argument 'axis' must be an integer, a list "
                        "of integers or null"}));
  EXPECT_TRUE(StatusIs(plan("scale", R"({"alpha": )"),
                       absl::StatusCode::kInvalidArgument,
                       {"malformed --kwargs JSON"}));
  EXPECT_TRUE(StatusIs(plan("scale", "[1, 2]"),
                       absl::StatusCode::kInvalidArgument,
                       {"--kwargs must be a JSON object"}));
}

TEST(PlannerErrorTest, BadMesh) {
  v1::JobSpec dup =
      Job("add", "x=2", {{kF32, {4}}, {kF32, {4}}}, {"P('x')"}, {"P('x')"});
  dup.mutable_mesh()->clear_axes();
  for (const char* name : {"x", "x"}) {
    v1::MeshAxis* a = dup.mutable_mesh()->add_axes();
    a->set_name(name);
    a->set_size(2);
  }
  const absl::Status s1 = PlanJob(dup, Lookup).status();
  EXPECT_TRUE(StatusIs(s1, absl::StatusCode::kInvalidArgument,
                       {"mesh axis 'x' appears twice"}));
  EXPECT_TRUE(absl::StartsWith(s1.message(), "mesh: ")) << s1;

  v1::JobSpec zero = dup;
  zero.mutable_mesh()->mutable_axes(1)->set_name("y");
  zero.mutable_mesh()->mutable_axes(1)->set_size(0);
  const absl::Status s2 = PlanJob(zero, Lookup).status();
  EXPECT_TRUE(StatusIs(s2, absl::StatusCode::kInvalidArgument,
                       {"mesh axis 'y' has size 0"}));
  EXPECT_TRUE(absl::StartsWith(s2.message(), "mesh: ")) << s2;

  v1::JobSpec empty = dup;
  empty.mutable_mesh()->clear_axes();  // set, but with no axes
  const absl::Status s3 = PlanJob(empty, Lookup).status();
  EXPECT_TRUE(
      StatusIs(s3, absl::StatusCode::kInvalidArgument, {"mesh has no axes"}));
  EXPECT_TRUE(absl::StartsWith(s3.message(), "mesh: ")) << s3;
  // Unset, and no resident argument to take one from (JAX's empty context
  // mesh).
  v1::JobSpec none = dup;
  none.clear_mesh();
  EXPECT_TRUE(StatusIs(PlanJob(none, Lookup).status(),
                       absl::StatusCode::kInvalidArgument,
                       {"mesh is missing"}));
}

TEST(PlannerErrorTest, BadArgHeader) {
  v1::JobSpec job =
      Job("add", "x=2", {{kF32, {4}}, {kF32, {4}}}, {"P('x')"}, {"P('x')"});
  job.mutable_args(1)->set_shape(0, -4);
  EXPECT_TRUE(StatusIs(PlanJob(job, Lookup).status(),
                       absl::StatusCode::kInvalidArgument,
                       {"args[1]: dimension 0 has negative size -4"}));
  job.mutable_args(1)->set_shape(0, 4);
  job.mutable_args(0)->set_dtype(v1::DTYPE_UNSPECIFIED);
  EXPECT_TRUE(StatusIs(PlanJob(job, Lookup).status(),
                       absl::StatusCode::kInvalidArgument,
                       {"args[0]: unsupported or missing dtype"}));
}

TEST(PlannerErrorTest, NoneAsOutSpec) {
  EXPECT_TRUE(StatusIs(
      PlanJob(
          Job("add", "x=2", {{kF32, {4}}, {kF32, {4}}}, {"P('x')"}, {"None"}),
          Lookup)
          .status(),
      absl::StatusCode::kInvalidArgument,
      {"out_specs is None, which is only meaningful for inputs", "use P()"}));
  EXPECT_TRUE(StatusIs(
      PlanJob(
          Job("split2", "x=2", {{kF32, {4}}}, {"P('x')"}, {"P('x')", "None"}),
          Lookup)
          .status(),
      absl::StatusCode::kInvalidArgument, {"out_specs[1] is None"}));
}

}  // namespace
}  // namespace shardmap

namespace shardmap {
namespace {

// JAX checks every spec's names (inputs and outputs) before any rank or
// divisibility check, so a bad out_spec is reported even when an input
// also does not divide.
TEST(PlannerErrorTest, SpecNamesAreCheckedBeforeRanksAndDivisibility) {
  const v1::JobSpec job = Job("scale", "x=4", {{kF32, {6}}}, {"P('x')"},
                              {"P('nope')"}, R"({"alpha": 1})");
  EXPECT_TRUE(StatusIs(PlanJob(job, Lookup).status(),
                       absl::StatusCode::kInvalidArgument,
                       {"out_specs", "mesh axis 'nope'"}));
  const v1::JobSpec job2 = Job("add", "x=4", {{kF32, {6}}, {kF32, {6}}},
                               {"P('x')", "P('x', None)", "P('x')"}, {"P()"});
  // Names are fine; the prefix (3 specs for 2 arguments) fails next.
  EXPECT_TRUE(StatusIs(PlanJob(job2, Lookup).status(),
                       absl::StatusCode::kInvalidArgument,
                       {"in_specs has 3 entries but there are 2 arguments"}));
}

TEST(PlannerErrorTest, MeshAxisNamedNoneIsRefused) {
  v1::JobSpec job = Job("scale", "x=2", {{kF32, {4}}}, {"P()"}, {"P()"});
  job.mutable_mesh()->mutable_axes(0)->set_name("None");
  EXPECT_TRUE(StatusIs(PlanJob(job, Lookup).status(),
                       absl::StatusCode::kInvalidArgument,
                       {"mesh: ", "'None'"}));
}

}  // namespace
}  // namespace shardmap

namespace shardmap {
namespace {

// Found by fuzz/job_spec_fuzzer: a number too large for a double made
// nlohmann throw out_of_range, which ParseKwargs did not catch, so the
// coordinator ended on such a request.
// The lock rule: resident arguments and read-only states are read; stored
// outputs and written states (read and written back) are written; a name
// both read and written counts only as written.
TEST(AccessOfTest, ReadOnlyStatesAreReadsAndWrittenStatesWrites) {
  const v1::FunctionSignature fn = Signature("step", 2, /*num_outputs=*/2)
                                       .State("buf", /*write=*/true)
                                       .State("cfg", /*write=*/false)
                                       .proto();
  v1::JobSpec job =
      Job("step", "x=1", {{kF32, {2}}, {kF32, {2}}}, {"P()"}, {"P()"});
  job.add_resident_args("a");
  job.add_resident_args("out");  // read and stored: a write
  job.add_resident_outputs("");
  job.add_resident_outputs("out");
  for (const auto& [slot, name] :
       std::vector<std::pair<std::string, std::string>>{
           {"buf", "old"}, {"buf", "b"}, {"cfg", "c"}, {"nope", "z"}}) {
    v1::StateBinding* b = job.add_states();
    b->set_slot(slot);
    b->set_name(name);
  }
  const ResidentAccess access = AccessOf(job, fn);
  EXPECT_EQ(access.reads, (std::set<std::string>{"a", "c"}));
  // The last binding of a slot counts, as in PlanJob; unknown slots none.
  EXPECT_EQ(access.writes, (std::set<std::string>{"b", "out"}));
}

TEST(ParseKwargsTest, NumberOverflowIsInvalidArgument) {
  const absl::StatusOr<nlohmann::json> k =
      ParseKwargs(R"({"perm": [[1, 444444444444444e4444444444444444444440]]})");
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(
      absl::StrContains(k.status().message(), "malformed --kwargs JSON"))
      << k.status();
}

}  // namespace
}  // namespace shardmap
