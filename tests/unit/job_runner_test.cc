// Tests of the job runner's failure paths with fake workers
// (tests/unit/fake_shard_channel.h), no process started: which device's
// error is the job's (and that it cancels the others), a device that
// times out, a worker lost mid-job, and copies that differ. The resident
// commit's paths are in resident_commit_test.cc. Steps are ordered by the
// fake's state and its clock, never by sleeps.
#include "server/job_runner.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/unit/job_runner_fixture.h"
#include "tests/unit/status_matchers.h"

namespace shardmap {
namespace {

// Every test runs the device calls both ways.
class JobRunnerTest : public JobRunnerBothWays {};

TEST_P(JobRunnerTest, AssemblesTheOutputFromEveryDevice) {
  ASSERT_NO_FATAL_FAILURE(RunIdentity(4));
  // Each device got its header (ticket 0, its own device id) and one
  // chunk of its block; a one-phase job gets no decision.
  for (int d = 0; d < 4; ++d) {
    std::vector<v1::ShardRequest> sent = connector_.Sent(workers_[d].address);
    ASSERT_EQ(sent.size(), 2u);
    EXPECT_EQ(sent[0].job().device_id(), d);
    EXPECT_EQ(sent[0].job().ticket(), 0u);
    EXPECT_FALSE(sent[0].job().two_phase());
    // No copies to compare: the workers need not hash the output.
    ASSERT_EQ(sent[0].job().skip_output_digests_size(), 1);
    EXPECT_TRUE(sent[0].job().skip_output_digests(0));
    EXPECT_EQ(sent[1].chunk().data(),
              std::string(reinterpret_cast<const char*>(Block(d).data()), 8));
  }
}

TEST_P(JobRunnerTest, TheFirstDeviceToFailIsTheJobsErrorAndCancelsTheOthers) {
  const JobPlan plan = IdentityPlan(4, "P('x')");
  for (int d = 0; d < 4; ++d) {
    FakeWorkerScript s;
    if (d == 2) {
      s.finish = absl::InvalidArgumentError("kwarg 'scale' is not a number");
    } else {
      s.block_read = 0;  // answers only when cancelled
    }
    connector_.Script(workers_[d].address, s);
  }
  JobRunner runner(RunnerOptions(), &connector_);
  auto out = Run(runner, plan, 4);
  EXPECT_TRUE(StatusIs(out.status(), absl::StatusCode::kInvalidArgument,
                       {"device 2 (mesh coordinates (2,), worker w2 at "
                        "127.0.0.1:5002)",
                        "kwarg 'scale' is not a number"}));
  // The others were cancelled, not left to their deadline.
  for (int d : {0, 1, 3}) {
    EXPECT_EQ(connector_.Finished(workers_[d].address), 1) << d;
    EXPECT_EQ(connector_.Waiting(workers_[d].address), 0) << d;
  }
}

TEST_P(JobRunnerTest, ADeviceThatDoesNotAnswerByTheDeadlineTimesOut) {
  const JobPlan plan = IdentityPlan(2, "P('x')");
  workers_.resize(2);
  AnswerAll(plan, 2);
  FakeWorkerScript slow;
  slow.block_read = 0;
  connector_.Script(workers_[1].address, slow);
  JobRunner runner(RunnerOptions(), &connector_);
  auto out = RunPastDeadline(runner, plan, 2, /*done=*/0, /*waiting=*/1);
  EXPECT_TRUE(StatusIs(out.status(), absl::StatusCode::kDeadlineExceeded,
                       {"timed out waiting for device 1", "worker w1"}));
}

TEST_P(JobRunnerTest, AWorkerLostMidJobFailsItUnavailableAtOnce) {
  const JobPlan plan = IdentityPlan(2, "P('x')");
  workers_.resize(2);
  AnswerAll(plan, 2);
  FakeWorkerScript stopped;  // a SIGSTOPped worker: never answers
  stopped.block_read = 0;
  connector_.Script(workers_[1].address, stopped);
  JobRunner::Options options = RunnerOptions();
  options.liveness_poll = absl::Milliseconds(1);
  options.check_live = [](const WorkerPool::Worker& w) {
    return w.id == "w1" ? absl::UnavailableError(
                              "worker w1 has not sent a heartbeat for 9s")
                        : absl::OkStatus();
  };
  JobRunner runner(options, &connector_);
  auto out = Run(runner, plan, 2);
  EXPECT_TRUE(StatusIs(out.status(), absl::StatusCode::kUnavailable,
                       {"device 1", "worker w1", "is unavailable",
                        "has not sent a heartbeat for 9s",
                        "it was running identity for job job-7"}));
}

TEST_P(JobRunnerTest, CopiesThatDifferFailCheckRepNamingOutputAxisDevices) {
  // out P() claims the output is replicated over x; identity's blocks
  // differ per device.
  const JobPlan plan = IdentityPlan(2, "P()");
  workers_.resize(2);
  AnswerAll(plan, 2);
  JobRunner runner(RunnerOptions(), &connector_);
  auto out = Run(runner, plan, 2);
  EXPECT_TRUE(StatusIs(out.status(), absl::StatusCode::kInvalidArgument,
                       {"identity output 0", "mesh axis 'x'",
                        "device 0 (mesh coordinates (0,), worker w0",
                        "device 1 (mesh coordinates (1,), worker w1"}));
  // The copies are compared, so every device was asked for its digest.
  for (int d = 0; d < 2; ++d) {
    const std::vector<v1::ShardRequest> sent =
        connector_.Sent(workers_[d].address);
    ASSERT_FALSE(sent.empty());
    ASSERT_EQ(sent[0].job().skip_output_digests_size(), 1);
    EXPECT_FALSE(sent[0].job().skip_output_digests(0)) << d;
  }
}

INSTANTIATE_TEST_SUITE_P(Calls, JobRunnerTest, JobRunnerBothWays::BothWays(),
                         JobRunnerBothWays::WayName);

// Which streams a lone small job takes under each --job-links.
class JobLinksTest : public JobRunnerFixture {
 protected:
  // Runs a lone identity job over 4 devices and checks its output.
  void RunLoneJob(JobLinks links) {
    links_ = links;
    RunIdentity(4);
  }
};

TEST_F(JobLinksTest, AutoTakesTheLinksWhenEveryWorkersLinkIsUp) {
  ASSERT_NO_FATAL_FAILURE(RunLoneJob(JobLinks::kAuto));
  for (const WorkerPool::Worker& w : workers_) {
    EXPECT_EQ(connector_.SmallReadyAsks(w.address), 1) << w.address;
    EXPECT_EQ(connector_.SmallOpens(w.address), 1) << w.address;
  }
}

TEST_F(JobLinksTest,
       AutoOpensStreamsOfItsOwnAndAsksEveryWorkerWhileLinksAreDown) {
  connector_.SetSmallReady(false);
  ASSERT_NO_FATAL_FAILURE(RunLoneJob(JobLinks::kAuto));
  // Every worker was asked (so each gets its link started), none skipped
  // once the first said no; the calls went on streams of their own.
  for (const WorkerPool::Worker& w : workers_) {
    EXPECT_EQ(connector_.SmallReadyAsks(w.address), 1) << w.address;
    EXPECT_EQ(connector_.SmallOpens(w.address), 0) << w.address;
  }
}

TEST_F(JobLinksTest, AutoKeepsALoneTwoPhaseJobOnStreamsOfItsOwn) {
  links_ = JobLinks::kAuto;
  ASSERT_NO_FATAL_FAILURE(RunStoredIdentity());
  for (const WorkerPool::Worker& w : workers_) {
    EXPECT_EQ(connector_.SmallReadyAsks(w.address), 1) << w.address;
    EXPECT_EQ(connector_.SmallOpens(w.address), 0) << w.address;
    EXPECT_EQ(connector_.Decisions(w.address), std::vector<bool>{true});
  }
}

TEST_F(JobLinksTest, AlwaysTakesTheLinksEvenWhileTheyAreMade) {
  connector_.SetSmallReady(false);
  ASSERT_NO_FATAL_FAILURE(RunLoneJob(JobLinks::kAlways));
  for (const WorkerPool::Worker& w : workers_) {
    EXPECT_EQ(connector_.SmallOpens(w.address), 1) << w.address;
  }
}

TEST_F(JobLinksTest, NeverAsksForTheLinks) {
  ASSERT_NO_FATAL_FAILURE(RunLoneJob(JobLinks::kNever));
  for (const WorkerPool::Worker& w : workers_) {
    EXPECT_EQ(connector_.SmallReadyAsks(w.address), 0) << w.address;
    EXPECT_EQ(connector_.SmallOpens(w.address), 0) << w.address;
  }
}

}  // namespace
}  // namespace shardmap
