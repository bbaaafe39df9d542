// Tests of server/output_assembly: which device's failure is a job's
// error, and the outputs assembled from what the devices returned, as pure
// functions of made-up device results.
#include "server/output_assembly.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/digest.h"
#include "tests/unit/status_matchers.h"
#include "tests/unit/test_jobs.h"

namespace shardmap {
namespace {

using Results = std::vector<absl::StatusOr<DeviceResult>>;

// What a device returns for `plan`'s one output: `block`, with its data
// where the coordinator asked for it.
DeviceResult Returned(const JobPlan& plan, int64_t d, Tensor block) {
  DeviceResult r;
  r.outputs.push_back(ArrayMeta{block.dtype(), block.shape()});
  r.digests.outputs.push_back(Digest(block));
  r.digests.resident_args.assign(plan.args.size(), 0);
  if (plan.StoredAs(0).empty() && plan.IsOutputRepresentative(0, d)) {
    r.blocks.emplace_back(std::move(block));
  } else {
    r.blocks.emplace_back(std::nullopt);
  }
  return r;
}

std::vector<absl::Status> NoneLost(int n) {
  return std::vector<absl::Status>(n);
}

TEST(AttributeFailureTest, AllSucceededIsOk) {
  const JobPlan plan = IdentityPlan(2, "P('x')");
  Results results;
  for (int d = 0; d < 2; ++d)
    results.push_back(Returned(plan, d, Floats({1, 2})));
  EXPECT_TRUE(
      AttributeFailure("j", plan, TestWorkers(2), NoneLost(2), results).ok());
}

TEST(AttributeFailureTest, ADevicesOwnErrorWinsOverTheCancellationsItCaused) {
  const JobPlan plan = IdentityPlan(4, "P('x')");
  Results results;
  results.push_back(absl::CancelledError("Cancelled"));
  results.push_back(absl::CancelledError("Cancelled"));
  results.push_back(absl::InvalidArgumentError("bad kwarg 'axis'"));
  results.push_back(Returned(plan, 3, Floats({6, 7})));
  absl::Status s =
      AttributeFailure("j", plan, TestWorkers(4), NoneLost(4), results);
  EXPECT_TRUE(StatusIs(s, absl::StatusCode::kInvalidArgument,
                       {"device 2 (mesh coordinates (2,), worker w2 at "
                        "127.0.0.1:5002)",
                        "bad kwarg 'axis'"}));
}

TEST(AttributeFailureTest, OnlyCancellationsReportTheFirst) {
  const JobPlan plan = IdentityPlan(2, "P('x')");
  Results results;
  results.push_back(absl::CancelledError("Cancelled"));
  results.push_back(absl::CancelledError("Cancelled"));
  EXPECT_TRUE(StatusIs(
      AttributeFailure("j", plan, TestWorkers(2), NoneLost(2), results),
      absl::StatusCode::kCancelled, {"device 0", "worker w0"}));
}

TEST(AttributeFailureTest, ATimeoutSaysWhichDeviceItWaitedFor) {
  const JobPlan plan = IdentityPlan(2, "P('x')");
  Results results;
  results.push_back(Returned(plan, 0, Floats({0, 1})));
  results.push_back(absl::DeadlineExceededError("Deadline Exceeded"));
  EXPECT_TRUE(StatusIs(
      AttributeFailure("j", plan, TestWorkers(2), NoneLost(2), results),
      absl::StatusCode::kDeadlineExceeded,
      {"timed out waiting for device 1 (mesh coordinates (1,), worker w1",
       "Deadline Exceeded"}));
}

TEST(AttributeFailureTest, ALostWorkerIsUnavailableWithWhatAPeerSaw) {
  const JobPlan plan = IdentityPlan(4, "P('x')");
  Results results;
  results.push_back(absl::CancelledError("Cancelled"));
  // Device 1's stream may even have ended well: its worker was lost.
  results.push_back(Returned(plan, 1, Floats({2, 3})));
  results.push_back(
      absl::UnavailableError("psum: no message from device 1 in 30s"));
  results.push_back(absl::CancelledError("Cancelled"));
  std::vector<absl::Status> lost = NoneLost(4);
  lost[1] = absl::UnavailableError("worker w1 has not sent a heartbeat");
  EXPECT_TRUE(StatusIs(
      AttributeFailure("job-3", plan, TestWorkers(4), lost, results),
      absl::StatusCode::kUnavailable,
      {"device 1 (mesh coordinates (1,), worker w1 at 127.0.0.1:5001) is "
       "unavailable: worker w1 has not sent a heartbeat; it was running "
       "identity for job job-3",
       "; device 2 saw: psum: no message from device 1 in 30s"}));
}

TEST(AssembleOutputsTest, BlocksArePlacedByTheOutSpec) {
  const JobPlan plan = IdentityPlan(4, "P('x')");
  Results results;
  for (int d = 0; d < 4; ++d) {
    results.push_back(Returned(plan, d, Floats({10.0f * d, 10.0f * d + 1})));
  }
  auto out = AssembleOutputs(plan, TestWorkers(4), results, 1 << 20);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 1u);
  const Tensor& t = *(*out)[0].data;
  EXPECT_EQ(t.shape(), (Shape{8}));
  const std::vector<float> want = {0, 1, 10, 11, 20, 21, 30, 31};
  EXPECT_EQ(std::vector<float>(t.data_as<float>(), t.data_as<float>() + 8),
            want);
  EXPECT_EQ((*out)[0].meta.shape, (Shape{8}));
  EXPECT_TRUE((*out)[0].stored_as.empty());
}

TEST(AssembleOutputsTest, AReplicatedOutputComesFromDeviceZero) {
  const JobPlan plan = IdentityPlan(2, "P()");
  Results results;
  for (int d = 0; d < 2; ++d)
    results.push_back(Returned(plan, d, Floats({4, 5})));
  auto out = AssembleOutputs(plan, TestWorkers(2), results, 1 << 20);
  ASSERT_TRUE(out.ok()) << out.status();
  const Tensor& t = *(*out)[0].data;
  EXPECT_EQ(std::vector<float>(t.data_as<float>(), t.data_as<float>() + 2),
            (std::vector<float>{4, 5}));
}

TEST(AssembleOutputsTest, ReplicatedCopiesThatDifferAreRefused) {
  const JobPlan plan = IdentityPlan(2, "P()");
  Results results;
  results.push_back(Returned(plan, 0, Floats({4, 5})));
  results.push_back(Returned(plan, 1, Floats({4, 6})));
  EXPECT_TRUE(
      StatusIs(AssembleOutputs(plan, TestWorkers(2), results, 1 << 20).status(),
               absl::StatusCode::kInvalidArgument,
               {"out_specs is P()", "identity output 0", "mesh axis 'x'",
                "device 0 (mesh coordinates (0,), worker w0",
                "device 1 (mesh coordinates (1,), worker w1"}));
}

TEST(AssembleOutputsTest, BlocksOfDifferentShapesAreRefused) {
  const JobPlan plan = IdentityPlan(2, "P('x')");
  Results results;
  results.push_back(Returned(plan, 0, Floats({0, 1})));
  results.push_back(Returned(plan, 1, Floats({2, 3, 4})));
  EXPECT_TRUE(StatusIs(
      AssembleOutputs(plan, TestWorkers(2), results, 1 << 20).status(),
      absl::StatusCode::kInvalidArgument,
      {"identity output 0 has block float32[2] on device 0 but float32[3] "
       "on device 1"}));
}

TEST(AssembleOutputsTest, AnOutputOverTheJobLimitIsRefused) {
  const JobPlan plan = IdentityPlan(2, "P('x')");
  Results results;
  for (int d = 0; d < 2; ++d)
    results.push_back(Returned(plan, d, Floats({1, 2})));
  EXPECT_TRUE(
      StatusIs(AssembleOutputs(plan, TestWorkers(2), results, 8).status(),
               absl::StatusCode::kResourceExhausted, {"16 bytes"}));
}

TEST(AssembleOutputsTest, AStoredOutputHasOnlyItsShape) {
  const JobPlan plan = IdentityPlan(2, "P('x')", "A");
  Results results;
  for (int d = 0; d < 2; ++d)
    results.push_back(Returned(plan, d, Floats({1, 2})));
  auto out = AssembleOutputs(plan, TestWorkers(2), results, 1 << 20);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_FALSE((*out)[0].data.has_value());
  EXPECT_EQ((*out)[0].meta.shape, (Shape{4}));
  EXPECT_EQ((*out)[0].meta.dtype, DType::kFloat32);
}

}  // namespace
}  // namespace shardmap
