// Tests of a --state-out-spec job on the coordinator (server/state_reshard.h,
// server/resident_commit.h) with fake workers: the workers are told the
// out spec (ShardJob.state_out_specs), and the one commit publishes the
// state in it; a commit a worker does not confirm publishes nothing, so
// the state keeps its previous version and sharding, and the workers drop
// the version written.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "server/state_reshard.h"
#include "tests/unit/job_runner_fixture.h"
#include "tests/unit/status_matchers.h"

namespace shardmap {
namespace {

class StateOutCommitTest : public JobRunnerFixture {
 protected:
  StateOutCommitTest() { workers_.resize(2); }

  // acc(x; state buffer, written) over x=2 on float32[4] P('x'), buffer
  // bound to "S", read P('x') and stored back as `out_spec`.
  absl::StatusOr<JobPlan> Plan(const char* out_spec) {
    v1::JobSpec spec;
    spec.set_function("acc");
    *spec.mutable_mesh() = MeshToProto(*Mesh::Create({{"x", 2}}));
    *spec.add_args() = HeaderToProto(DType::kFloat32, {4});
    *spec.add_in_specs() = SpecToProto(*PartitionSpec::Parse("P('x')"));
    *spec.add_out_specs() = SpecToProto(*PartitionSpec::Parse("P('x')"));
    v1::StateBinding* b = spec.add_states();
    b->set_slot("buffer");
    b->set_name("S");
    *b->mutable_spec() = SpecToProto(*PartitionSpec::Parse("P('x')"));
    *b->mutable_out_spec() = SpecToProto(*PartitionSpec::Parse(out_spec));
    return PlanJob(
        spec,
        [](const std::string&) {
          return absl::StatusOr<v1::FunctionSignature>(
              Signature("acc", 1).State("buffer", true).proto());
        },
        &index_);
  }

  // Runs `plan` with worker 1 answering by `script`, worker 0 as asked.
  absl::StatusOr<std::vector<JobOutput>> RunWithWorker1(
      const JobPlan& plan, FakeWorkerScript script) {
    AnswerAll(plan, 2);
    connector_.Script(workers_[1].address, std::move(script));
    JobRunner runner(JobRunner::Options{}, &connector_, &index_);
    return Run(runner, plan, 2);
  }
};

TEST_F(StateOutCommitTest, TheCommitPublishesTheStateInItsOutSpec) {
  const uint64_t before = Resident("S");
  absl::StatusOr<JobPlan> plan = Plan("P()");
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_TRUE(plan->states[0].out_spec.has_value());
  AnswerAll(*plan, 2);
  JobRunner runner(JobRunner::Options{}, &connector_, &index_);
  auto out = Run(runner, *plan, 2);
  ASSERT_TRUE(out.ok()) << out.status();
  for (const WorkerPool::Worker& w : workers_) {
    const v1::ShardJob job = connector_.Sent(w.address)[0].job();
    ASSERT_EQ(job.state_out_specs_size(), 1);
    EXPECT_EQ(SpecFromProto(job.state_out_specs(0)).ToString(), "P()");
    EXPECT_EQ(connector_.Decisions(w.address), std::vector<bool>{true});
  }
  auto s = index_.Find("S");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_GT(s->version, before);
  EXPECT_EQ(s->spec.ToString(), "P()");
}

TEST_F(StateOutCommitTest, AnUnconfirmedCommitLeavesTheStateAsItWas) {
  const uint64_t before = Resident("S");
  absl::StatusOr<JobPlan> plan = Plan("P()");
  ASSERT_TRUE(plan.ok()) << plan.status();
  FakeWorkerScript lost;
  lost.responses = FakeAnswer(*plan, 1, Block(1));
  lost.commit_finish = absl::UnavailableError("worker w1 went away");
  auto out = RunWithWorker1(*plan, std::move(lost));
  EXPECT_TRUE(StatusIs(out.status(), absl::StatusCode::kUnavailable,
                       {"job job-7 is not committed", "device 1",
                        "keep their previous versions"}));
  auto s = index_.Find("S");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->version, before);
  EXPECT_EQ(s->spec.ToString(), "P('x',)");
  const uint64_t written =
      connector_.Sent(workers_[0].address)[0].job().states(0).write_version();
  for (const WorkerPool::Worker& w : workers_) {
    EXPECT_EQ(connector_.Drops(w.address),
              (std::vector<std::pair<std::string, uint64_t>>{{"S", written}}))
        << w.address;
  }
}

// A worker that predates ShardJob.state_out_specs stages the state in the
// job's sharding and does not say it honoured the out spec: the job fails
// naming the state, and nothing is published.
TEST_F(StateOutCommitTest, AWorkerThatIgnoresTheOutSpecFailsTheJob) {
  const uint64_t before = Resident("S");
  absl::StatusOr<JobPlan> plan = Plan("P()");
  ASSERT_TRUE(plan.ok()) << plan.status();
  FakeWorkerScript old;
  old.responses = FakeAnswer(*plan, 1, Block(1));
  old.responses[0].mutable_outputs()->set_state_out_specs_applied(false);
  auto out = RunWithWorker1(*plan, std::move(old));
  EXPECT_TRUE(StatusIs(out.status(), absl::StatusCode::kFailedPrecondition,
                       {"state 'buffer' (S)", "P()", "older shardmap"}));
  auto s = index_.Find("S");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->version, before);
  EXPECT_EQ(s->spec.ToString(), "P('x',)");
}

TEST_F(StateOutCommitTest, AnOutSpecLikeTheReadOneIsNoReshard) {
  Resident("S");
  absl::StatusOr<JobPlan> plan = Plan("P('x')");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_FALSE(plan->states[0].out_spec.has_value());
}

TEST_F(StateOutCommitTest, AnOutSpecThatDoesNotFitNamesTheState) {
  Resident("S");
  EXPECT_TRUE(StatusIs(Plan("P('y')").status(),
                       absl::StatusCode::kInvalidArgument,
                       {"the out_spec of state 'buffer'"}));
}

}  // namespace
}  // namespace shardmap
