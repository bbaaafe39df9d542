// JAX's mesh and axes rules through the C++ client on an in-process
// cluster of 8 workers: the client's default mesh (JAX's set_mesh), the
// mesh and specs of resident arguments (JAX's Infer), partial-manual jobs
// (axis_names / auto) on 1-D, 2-D and 3-D meshes, and psum over no axes.
// References are plain loops in this file.
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "client/shard_client.h"
#include "tests/integration/test_cluster.h"
#include "tests/unit/status_matchers.h"

namespace shardmap {
namespace {

PartitionSpec Spec(const char* text) { return *PartitionSpec::Parse(text); }

// [rows, cols] float64 holding 0, 1, 2, ... row-major.
Tensor Iota(int64_t rows, int64_t cols) {
  Tensor t(DType::kFloat64, {rows, cols});
  for (int64_t i = 0; i < rows * cols; ++i) t.data_as<double>()[i] = i;
  return t;
}

std::vector<double> Values(const Tensor& t) {
  const double* p = t.data_as<double>();
  return std::vector<double>(p, p + t.num_elements());
}

// The sum of the `parts` equal row blocks of `t`.
std::vector<double> SumOfRowBlocks(const Tensor& t, int parts) {
  const int64_t n = t.num_elements() / parts;
  std::vector<double> out(n, 0.0);
  for (int k = 0; k < parts; ++k) {
    for (int64_t i = 0; i < n; ++i) out[i] += t.data_as<double>()[k * n + i];
  }
  return out;
}

// psum(x, axes) with x split by `in_spec`, unassembled by `out_spec`.
JobRequest PsumJob(const Tensor* x, const char* in_spec, const char* out_spec,
                   const char* axes_json) {
  JobRequest job;
  job.function = "psum";
  job.args = {x};
  job.in_specs = {Spec(in_spec)};
  job.out_specs = {Spec(out_spec)};
  job.kwargs_json = absl::StrCat(R"({"axes": )", axes_json, "}");
  return job;
}

class JaxAxesClusterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { cluster_ = new TestCluster({8}); }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  static std::unique_ptr<ShardClient> Client(
      std::optional<Mesh> default_mesh = std::nullopt) {
    ShardClient::Options options;
    options.address = cluster_->address();
    options.default_mesh = std::move(default_mesh);
    return *ShardClient::Create(options);
  }
  static TestCluster* cluster_;
};
TestCluster* JaxAxesClusterTest::cluster_ = nullptr;

TEST_F(JaxAxesClusterTest, DefaultMeshServesJobsThatNameNone) {
  Tensor x = Iota(8, 2);
  JobRequest job = PsumJob(&x, "P('x')", "P()", R"("x")");
  auto client = Client(*Mesh::Parse("x=4"));
  auto result = client->Run(job);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->num_devices, 4);
  EXPECT_EQ(Values(result->outputs[0]), SumOfRowBlocks(x, 4));
  job.mesh = *Mesh::Parse("x=2");  // the job's own mesh wins
  result = client->Run(job);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->num_devices, 2);
  EXPECT_EQ(Values(result->outputs[0]), SumOfRowBlocks(x, 2));
  job.mesh.reset();  // no mesh anywhere, no resident argument
  EXPECT_TRUE(StatusIs(Client()->Run(job).status(),
                       absl::StatusCode::kInvalidArgument,
                       {"mesh is missing"}));
}

TEST_F(JaxAxesClusterTest, ResidentArgumentsGiveMeshAndSpecs) {
  Tensor a = Iota(8, 4);
  auto client = Client();
  ASSERT_TRUE(client
                  ->Put("axes/cube", a, *Mesh::Parse("x=2,y=2,z=2"),
                        Spec("P(('x', 'z'), 'y')"))
                  .ok());
  JobRequest job;
  job.function = "add";
  job.args = {nullptr, nullptr};
  job.resident_args = {"axes/cube", "axes/cube"};
  job.out_specs = {Spec("P(('x', 'z'), 'y')")};
  auto result = client->Run(job);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->num_devices, 8);
  std::vector<double> want = Values(a);
  for (double& v : want) v *= 2;
  EXPECT_EQ(Values(result->outputs[0]), want);
  // Mixed: one inferred, one given (a resharding of the same array).
  job.in_specs = {PartitionSpec::Infer(), Spec("P(('x', 'z'), 'y')")};
  result = client->Run(job);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(Values(result->outputs[0]), want);
}

TEST_F(JaxAxesClusterTest, PartialManualPsumEqualsJax) {
  // Mesh x=2,y=2 with y auto: blocks split over x only, so psum over x
  // is the sum of the two row halves, the same on every device.
  Tensor x = Iota(8, 2);
  JobRequest job = PsumJob(&x, "P('x')", "P()", R"("x")");
  job.mesh = *Mesh::Parse("x=2,y=2");
  job.auto_axes = {"y"};
  auto result = Client()->Run(job);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(Values(result->outputs[0]), SumOfRowBlocks(x, 2));
  // 3-D: manual x and z, y auto; a program psums over z.
  JobRequest prog;
  prog.program = "lambda v: psum(v, 'z')";
  prog.mesh = *Mesh::Parse("x=2,y=2,z=2");
  prog.axis_names = {"x", "z"};
  prog.args = {&x};
  prog.in_specs = {Spec("P(('x', 'z'))")};
  prog.out_specs = {Spec("P('x')")};
  result = Client()->Run(prog);
  ASSERT_TRUE(result.ok()) << result.status();
  // Row blocks of 2: x=0 holds blocks 0,1 (z); x=1 blocks 2,3.
  std::vector<double> want;
  for (int xi = 0; xi < 2; ++xi) {
    for (int i = 0; i < 4; ++i) {
      want.push_back(x.data_as<double>()[(2 * xi) * 4 + i] +
                     x.data_as<double>()[(2 * xi + 1) * 4 + i]);
    }
  }
  EXPECT_EQ(Values(result->outputs[0]), want);
  // An auto axis in a collective or a spec: JAX's words.
  job.kwargs_json = R"({"axes": "y"})";
  EXPECT_TRUE(StatusIs(Client()->Run(job).status(),
                       absl::StatusCode::kInvalidArgument,
                       {"Found an unbound axis name: y"}));
  job.kwargs_json = R"({"axes": "x"})";
  job.in_specs = {Spec("P('y')")};
  EXPECT_TRUE(StatusIs(
      Client()->Run(job).status(), absl::StatusCode::kInvalidArgument,
      {"must refer to an axis marked as manual", "in_specs refers to 'y'"}));
}

TEST_F(JaxAxesClusterTest, PsumOverNoAxesIsIdentity) {
  Tensor x = Iota(4, 2);
  JobRequest job = PsumJob(&x, "P('i')", "P('i')", "[]");
  job.mesh = *Mesh::Parse("i=4");
  job.axis_names = {"i"};
  auto result = Client()->Run(job);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(Values(result->outputs[0]), Values(x));
}

}  // namespace
}  // namespace shardmap
