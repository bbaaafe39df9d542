// Test helper shared by the job runner's unit tests: fake workers
// (tests/unit/fake_shard_channel.h) answering an identity job, a resident
// index, and ways to run a job against them.
#ifndef SHARDMAP_TESTS_UNIT_JOB_RUNNER_FIXTURE_H_
#define SHARDMAP_TESTS_UNIT_JOB_RUNNER_FIXTURE_H_

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "server/job_runner.h"
#include "server/resident_index.h"
#include "tests/unit/fake_shard_channel.h"
#include "tests/unit/test_jobs.h"

namespace shardmap {

class JobRunnerFixture : public ::testing::Test {
 protected:
  JobRunnerFixture() { spdlog::set_level(spdlog::level::off); }

  // The job's argument: 0, 1, 2, ... (two per device).
  Tensor Input(int devices) {
    std::vector<float> v;
    for (int i = 0; i < 2 * devices; ++i) v.push_back(i);
    return Floats(v);
  }
  // Device d's block of Input: what identity answers.
  Tensor Block(int d) { return Floats({2.0f * d, 2.0f * d + 1}); }

  absl::StatusOr<std::vector<JobOutput>> Run(
      JobRunner& runner, const JobPlan& plan, int devices,
      const std::function<bool()>& cancelled = nullptr) {
    std::vector<Tensor> inputs;
    inputs.push_back(Input(devices));
    return runner.Run("job-7", plan, std::move(inputs), workers_,
                      connector_.Now() + absl::Seconds(10), cancelled);
  }
  // Runs the job on another thread; once device `done` has finished and
  // device `waiting` waits, moves the fake clock past the job's deadline.
  absl::StatusOr<std::vector<JobOutput>> RunPastDeadline(JobRunner& runner,
                                                         const JobPlan& plan,
                                                         int devices, int done,
                                                         int waiting) {
    std::optional<absl::StatusOr<std::vector<JobOutput>>> out;
    std::thread job([&] { out = Run(runner, plan, devices); });
    EXPECT_TRUE(connector_.WaitFor([&] {
      connector_.AssertHeld();
      return connector_.FinishedLocked(workers_[done].address) == 1 &&
             connector_.WaitingLocked(workers_[waiting].address) == 1;
    }));
    connector_.Advance(absl::Seconds(11));
    job.join();
    return *std::move(out);
  }
  // Every device answers identity's block (stored outputs: header only).
  void AnswerAll(const JobPlan& plan, int devices) {
    for (int d = 0; d < devices; ++d) {
      FakeWorkerScript s;
      s.responses = FakeAnswer(plan, d, Block(d));
      connector_.Script(workers_[d].address, s);
    }
  }
  // Runs identity over `devices` devices, each answering its block, and
  // checks that the assembled output is the input.
  void RunIdentity(int devices) {
    const JobPlan plan = IdentityPlan(devices, "P('x')");
    AnswerAll(plan, devices);
    JobRunner runner(RunnerOptions(), &connector_);
    auto out = Run(runner, plan, devices);
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_EQ(out->size(), 1u);
    EXPECT_EQ(FloatValues(*(*out)[0].data), FloatValues(Input(devices)));
  }
  // Runs identity over the first 2 devices storing its output as "A" (a
  // two-phase job), each answering, and checks that it was stored, not
  // returned. The index then holds "A".
  void RunStoredIdentity() {
    workers_.resize(2);
    const JobPlan plan = IdentityPlan(2, "P('x')", "A", &index_);
    AnswerAll(plan, 2);
    JobRunner runner(RunnerOptions(), &connector_, &index_);
    auto out = Run(runner, plan, 2);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].stored_as, "A");
    EXPECT_FALSE((*out)[0].data.has_value());
  }
  // An index holding `name` as float32[4] P('x') over x=2 on w0, w1.
  uint64_t Resident(const std::string& name) {
    ResidentArray a;
    a.name = name;
    a.meta = ArrayMeta{DType::kFloat32, {4}};
    a.mesh = *Mesh::Create({{"x", 2}});
    a.spec = *PartitionSpec::Parse("P('x')");
    a.worker_ids = {"w0", "w1"};
    a.addresses = {workers_[0].address, workers_[1].address};
    a.version = index_.NextVersion();
    index_.Commit(a);
    return a.version;
  }

  std::vector<WorkerPool::Worker> workers_ = TestWorkers(4);
  // kAlways: the job's calls go through OpenSmall and, the job being
  // tiny, run serially on the job's thread (DeviceFanout::Options::serial);
  // kNever: each on a thread of its own.
  JobLinks links_ = JobLinks::kNever;
  JobRunner::Options RunnerOptions() const {
    JobRunner::Options options;
    options.job_links = links_;
    return options;
  }
  FakeWorkerConnector connector_;
  ResidentIndex index_{[](const std::string&) { return true; }};
};

// The fixture for tests that run the device calls both ways: each on its
// own thread, and serially on the job's thread. Instantiate with
// INSTANTIATE_TEST_SUITE_P(Calls, Suite, BothWays(), WayName).
class JobRunnerBothWays : public JobRunnerFixture,
                          public ::testing::WithParamInterface<JobLinks> {
 protected:
  JobRunnerBothWays() { links_ = GetParam(); }

 public:
  static auto BothWays() {
    return ::testing::Values(JobLinks::kNever, JobLinks::kAlways);
  }
  static std::string WayName(const ::testing::TestParamInfo<JobLinks>& info) {
    return info.param == JobLinks::kAlways ? "Serial" : "Threads";
  }
};

}  // namespace shardmap

#endif  // SHARDMAP_TESTS_UNIT_JOB_RUNNER_FIXTURE_H_
