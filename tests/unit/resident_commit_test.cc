// Tests of the resident commit of a job (server/resident_commit.h) through
// the job runner with fake workers: a commit every worker confirms is
// published; one a worker refuses or does not confirm in time publishes
// nothing, keeps the previous version, and has every worker drop the
// version it wrote; a job cancelled before its decision commits nothing;
// a commit that places an array on other workers has its former holders
// drop it.
#include "server/resident_commit.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "tests/unit/job_runner_fixture.h"
#include "tests/unit/status_matchers.h"

namespace shardmap {
namespace {

// Every test runs the device calls both ways.
class ResidentCommitTest : public JobRunnerBothWays {};

TEST_P(ResidentCommitTest, ACommitEveryWorkerConfirmsIsPublished) {
  const uint64_t before = Resident("A");
  ASSERT_NO_FATAL_FAILURE(RunStoredIdentity());
  auto a = index_.Find("A");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_GT(a->version, before);
  EXPECT_EQ(a->version, connector_.Sent(workers_[0].address)[0]
                            .job()
                            .resident_outputs(0)
                            .version());
  for (const WorkerPool::Worker& w : workers_) {
    EXPECT_EQ(connector_.Decisions(w.address), std::vector<bool>{true});
    EXPECT_TRUE(connector_.Drops(w.address).empty());
  }
}

TEST_P(ResidentCommitTest, ACommitElsewhereHasTheFormerHoldersDropTheArray) {
  Resident("A");  // on workers 0 and 1
  const std::vector<WorkerPool::Worker> former = {workers_[0], workers_[1]};
  // The job's devices go to other workers (after a restart, the order the
  // workers registered in).
  workers_ = {workers_[2], workers_[3]};
  const JobPlan plan = IdentityPlan(2, "P('x')", "A", &index_);
  AnswerAll(plan, 2);
  JobRunner runner(RunnerOptions(), &connector_, &index_);
  auto out = Run(runner, plan, 2);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(
      index_.Find("A")->addresses,
      (std::vector<std::string>{workers_[0].address, workers_[1].address}));
  // Told before the job was answered: every version of it.
  for (const WorkerPool::Worker& w : former) {
    EXPECT_EQ(connector_.Drops(w.address),
              (std::vector<std::pair<std::string, uint64_t>>{{"A", 0}}))
        << w.address;
  }
  for (const WorkerPool::Worker& w : workers_) {
    EXPECT_TRUE(connector_.Drops(w.address).empty()) << w.address;
  }
}

TEST_P(ResidentCommitTest, ACommitOneWorkerRefusesPublishesNothingAndIsUndone) {
  const uint64_t before = Resident("A");
  workers_.resize(2);
  const JobPlan plan = IdentityPlan(2, "P('x')", "A", &index_);
  AnswerAll(plan, 2);
  FakeWorkerScript full;
  full.responses = FakeAnswer(plan, 1, Block(1));
  full.commit_finish = absl::ResourceExhaustedError(
      "cannot write /state/arrays/A/v9.npy: No space left on device");
  connector_.Script(workers_[1].address, full);
  JobRunner runner(RunnerOptions(), &connector_, &index_);
  auto out = Run(runner, plan, 2);
  EXPECT_TRUE(
      StatusIs(out.status(), absl::StatusCode::kResourceExhausted,
               {"job job-7 is not committed", "device 1", "worker w1",
                "did not confirm its writes", "keep their previous versions",
                "No space left on device"}));
  // The index still has the previous version.
  auto a = index_.Find("A");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->version, before);
  // Both were told to commit, and then to drop exactly the new version.
  const uint64_t written = connector_.Sent(workers_[0].address)[0]
                               .job()
                               .resident_outputs(0)
                               .version();
  ASSERT_GT(written, before);
  for (const WorkerPool::Worker& w : workers_) {
    EXPECT_EQ(connector_.Decisions(w.address), std::vector<bool>{true});
    EXPECT_EQ(connector_.Drops(w.address),
              (std::vector<std::pair<std::string, uint64_t>>{{"A", written}}))
        << w.address;
  }
}

TEST_P(ResidentCommitTest, ACommitThatTimesOutPublishesNothingAndIsUndone) {
  const uint64_t before = Resident("A");
  workers_.resize(2);
  const JobPlan plan = IdentityPlan(2, "P('x')", "A", &index_);
  AnswerAll(plan, 2);
  FakeWorkerScript hung;  // applies its writes and never says so
  hung.responses = FakeAnswer(plan, 1, Block(1));
  hung.block_after_commit = true;
  connector_.Script(workers_[1].address, hung);
  JobRunner runner(RunnerOptions(), &connector_, &index_);
  auto out = RunPastDeadline(runner, plan, 2, /*done=*/0, /*waiting=*/1);
  EXPECT_TRUE(StatusIs(out.status(), absl::StatusCode::kDeadlineExceeded,
                       {"is not committed", "device 1"}));
  EXPECT_EQ(index_.Find("A")->version, before);
  EXPECT_EQ(connector_.Drops(workers_[1].address).size(), 1u);
  EXPECT_EQ(connector_.Drops(workers_[0].address).size(), 1u);
}

TEST_P(ResidentCommitTest, ACancelBeforeTheDecisionCommitsNothing) {
  const uint64_t before = Resident("A");
  workers_.resize(2);
  const JobPlan plan = IdentityPlan(2, "P('x')", "A", &index_);
  AnswerAll(plan, 2);
  FakeWorkerScript slow;
  slow.block_read = 0;
  connector_.Script(workers_[1].address, slow);
  JobRunner::Options options = RunnerOptions();
  options.liveness_poll = absl::Milliseconds(1);
  JobRunner runner(options, &connector_, &index_);
  // The client goes away once device 0 has answered (its writes are
  // staged, waiting for the decision).
  auto out = Run(runner, plan, 2, [&] {
    return connector_.Delivered(workers_[0].address) == 1;
  });
  EXPECT_TRUE(
      StatusIs(out.status(), absl::StatusCode::kCancelled, {"device 1"}));
  // Every stream was cancelled (a worker drops the staged writes of a
  // stream that ends without a decision): no commit went out, so nothing
  // needs undoing, and the index keeps the previous version.
  for (const WorkerPool::Worker& w : workers_) {
    EXPECT_EQ(connector_.Finished(w.address), 1) << w.address;
    EXPECT_TRUE(connector_.Decisions(w.address).empty()) << w.address;
    EXPECT_TRUE(connector_.Drops(w.address).empty()) << w.address;
  }
  EXPECT_EQ(index_.Find("A")->version, before);
}

INSTANTIATE_TEST_SUITE_P(Calls, ResidentCommitTest,
                         JobRunnerBothWays::BothWays(),
                         JobRunnerBothWays::WayName);

}  // namespace
}  // namespace shardmap
