// The coordinator's job queue end to end (server/job_admission.h,
// server/run_job_call.h), on an in-process cluster that runs one job at a
// time and lets one more wait: a job beyond the limit waits for its turn
// and then runs; one beyond the queue is refused; a waiting job whose client
// cancels, or whose deadline passes, leaves the queue. A job holds the one slot
// by sending its JobSpec and then nothing: it waits for its arguments. What
// runs and waits is read from GetClusterStatus. The drain is
// job_queue_drain_test's.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <thread>

#include "client/shard_client.h"
#include "rpc/channel.h"
#include "shardmap/v1/coordinator.grpc.pb.h"
#include "tests/integration/job_queue_util.h"
#include "tests/integration/test_cluster.h"
#include "tests/unit/wait_until.h"
#include "wire/proto_convert.h"

namespace shardmap {
namespace {

class JobQueueTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    TestCluster::Options options = OneJobAtATime();
    options.max_queued_jobs = 1;
    cluster_ = new TestCluster(options);
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override {
    client_ = *ShardClient::Create({cluster_->address()});
  }
  bool Jobs(int running, int waiting) {
    return WaitForJobs(*client_, running, waiting);
  }

  static inline TestCluster* cluster_ = nullptr;
  std::unique_ptr<ShardClient> client_;
};

TEST_F(JobQueueTest, AJobBeyondTheLimitWaitsItsTurnOneMoreIsRefused) {
  RawJob holder(cluster_->address(), absl::Seconds(30));
  ASSERT_TRUE(Jobs(1, 0));

  Tensor x(DType::kFloat32, {4});
  for (int i = 0; i < 4; ++i) x.data_as<float>()[i] = 10.0f * i;
  JobRequest job;
  job.function = "identity";
  job.mesh = *Mesh::Parse("x=2");
  job.args = {&x};
  job.in_specs = job.out_specs = {*PartitionSpec::Parse("P('x')")};
  absl::StatusOr<JobResult> waited;
  std::thread waiter([&] { waited = client_->Run(job); });
  // Joined however the test ends (an ASSERT returns early).
  std::unique_ptr<std::thread, void (*)(std::thread*)> join_waiter(
      &waiter, [](std::thread* t) {
        if (t->joinable()) t->join();
      });
  ASSERT_TRUE(Jobs(1, 1));

  // The queue is full: refused at once, naming both limits.
  RawJob refused(cluster_->address(), absl::Seconds(30));
  const grpc::Status r = refused.Drain(nullptr);
  EXPECT_EQ(r.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(r.error_message().find("--max-concurrent-jobs"), std::string::npos)
      << r.error_message();
  EXPECT_NE(r.error_message().find("--max-queued-jobs"), std::string::npos)
      << r.error_message();

  EXPECT_TRUE(holder.CompletesAsIdentity());
  waiter.join();
  ASSERT_TRUE(waited.ok()) << waited.status();
  ASSERT_EQ(waited->outputs.size(), 1u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(waited->outputs[0].data_as<float>()[i], 10.0f * i);
  }
  EXPECT_TRUE(Jobs(0, 0));
}

TEST_F(JobQueueTest, AWaitingJobWhoseClientCancelsLeavesTheQueue) {
  RawJob holder(cluster_->address(), absl::Seconds(30));
  ASSERT_TRUE(Jobs(1, 0));
  RawJob waiting(cluster_->address(), absl::Seconds(30));
  ASSERT_TRUE(Jobs(1, 1));
  EXPECT_EQ(waiting.Cancel().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(Jobs(1, 0));

  EXPECT_TRUE(holder.CompletesAsIdentity());
  EXPECT_TRUE(Jobs(0, 0));
}

TEST_F(JobQueueTest, AWaitingJobWhoseDeadlinePassesLeavesTheQueue) {
  RawJob holder(cluster_->address(), absl::Seconds(30));
  ASSERT_TRUE(Jobs(1, 0));
  RawJob waiting(cluster_->address(), absl::Seconds(2));
  ASSERT_TRUE(Jobs(1, 1));
  // At its deadline it leaves the queue, never having run.
  EXPECT_EQ(waiting.Drain(nullptr).error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_TRUE(Jobs(1, 0));

  EXPECT_TRUE(holder.CompletesAsIdentity());
  EXPECT_TRUE(Jobs(0, 0));
}

// A job waits past the coordinator's --max-job-seconds (its client set no
// earlier deadline): the coordinator ends it then, saying it never started,
// before the job holding the turn (as old, plus its stream's margin) is
// cancelled.
TEST(JobQueueDeadlineTest, AJobStillWaitingAtItsDeadlineSaysItNeverStarted) {
  TestCluster::Options options = OneJobAtATime();
  options.max_job_time = absl::Seconds(2);
  TestCluster cluster(options);
  auto client = *ShardClient::Create({cluster.address()});
  RawJob holder(cluster.address(), absl::Seconds(60));
  ASSERT_TRUE(WaitForJobs(*client, 1, 0));
  RawJob waiting(cluster.address(), absl::Seconds(60));
  ASSERT_TRUE(WaitForJobs(*client, 1, 1));
  const grpc::Status w = waiting.Drain(nullptr);
  EXPECT_EQ(w.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_NE(w.error_message().find("never started"), std::string::npos)
      << w.error_message();
  EXPECT_NE(w.error_message().find("--max-concurrent-jobs"), std::string::npos)
      << w.error_message();
  // The holder's call, stalled, is cancelled a little after its deadline.
  EXPECT_EQ(holder.Drain(nullptr).error_code(), grpc::StatusCode::CANCELLED);
}

}  // namespace
}  // namespace shardmap
