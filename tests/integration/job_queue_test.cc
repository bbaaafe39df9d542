// The coordinator's job queue end to end (server/job_admission.h,
// server/run_job_call.h), on an in-process cluster that runs one job at a
// time and lets one more wait: a job beyond the limit waits for its turn
// and then runs; one beyond the queue is refused; a waiting job whose client
// cancels, or whose deadline passes, leaves the queue; a drain turns the
// waiting jobs away at once. A job holds the one slot by sending its
// JobSpec and then nothing: it waits for its arguments. What runs and
// waits is read from GetClusterStatus.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <thread>

#include "client/shard_client.h"
#include "rpc/channel.h"
#include "shardmap/v1/coordinator.grpc.pb.h"
#include "tests/integration/test_cluster.h"
#include "tests/unit/wait_until.h"
#include "wire/proto_convert.h"

namespace shardmap {
namespace {

// A RunJob call made by hand: identity of float32[4] over x=2.
class RawJob {
 public:
  RawJob(const std::string& address, absl::Duration timeout)
      : stub_(v1::Coordinator::NewStub(MakeChannel(address))) {
    context_.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
    stream_ = stub_->RunJob(&context_);
    v1::RunJobRequest spec;
    v1::JobSpec* s = spec.mutable_spec();
    s->set_function("identity");
    *s->mutable_mesh() = MeshToProto(*Mesh::Parse("x=2"));
    *s->add_args() = HeaderToProto(DType::kFloat32, {4});
    *s->add_in_specs() = SpecToProto(*PartitionSpec::Parse("P('x')"));
    *s->add_out_specs() = SpecToProto(*PartitionSpec::Parse("P('x')"));
    stream_->Write(spec);
  }
  // Sends the argument (1, 2, 3, 4) and ends the call: its status, and in
  // `values` the output it got back.
  grpc::Status Complete(std::vector<float>* values) {
    const std::vector<float> x = {1, 2, 3, 4};
    v1::RunJobRequest chunk;
    chunk.mutable_chunk()->set_data(
        std::string(reinterpret_cast<const char*>(x.data()), 16));
    stream_->Write(chunk);
    stream_->WritesDone();
    return Drain(values);
  }
  grpc::Status Cancel() {
    context_.TryCancel();
    return Drain(nullptr);
  }
  // The status of a call the server ended by itself.
  grpc::Status Drain(std::vector<float>* values) {
    v1::RunJobResponse response;
    while (stream_->Read(&response)) {
      if (values != nullptr && response.has_chunk()) {
        const std::string& d = response.chunk().data();
        const float* f = reinterpret_cast<const float*>(d.data());
        values->insert(values->end(), f, f + d.size() / sizeof(float));
      }
    }
    return stream_->Finish();
  }

 private:
  std::unique_ptr<v1::Coordinator::Stub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<
      grpc::ClientReaderWriter<v1::RunJobRequest, v1::RunJobResponse>>
      stream_;
};

class JobQueueTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    TestCluster::Options options;
    options.num_workers = 2;
    options.max_concurrent_jobs = 1;
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
  // Waits until `running` jobs run and `waiting` wait.
  bool Jobs(int running, int waiting) {
    return WaitUntil([&] {
      auto s = client_->Status();
      return s.ok() && s->jobs_running() == running &&
             s->jobs_waiting() == waiting;
    });
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

  std::vector<float> values;
  const grpc::Status first = holder.Complete(&values);
  EXPECT_TRUE(first.ok()) << first.error_message();
  EXPECT_EQ(values, (std::vector<float>{1, 2, 3, 4}));
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

  std::vector<float> values;
  EXPECT_TRUE(holder.Complete(&values).ok());
  EXPECT_EQ(values, (std::vector<float>{1, 2, 3, 4}));
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

  std::vector<float> values;
  EXPECT_TRUE(holder.Complete(&values).ok());
  EXPECT_EQ(values, (std::vector<float>{1, 2, 3, 4}));
  EXPECT_TRUE(Jobs(0, 0));
}

// A cluster of its own: the drain stops its coordinator.
TEST(JobQueueDrainTest, ADrainTurnsTheWaitingAwayAndLetsTheRunningFinish) {
  TestCluster::Options options;
  options.num_workers = 2;
  options.max_concurrent_jobs = 1;
  TestCluster cluster(options);
  auto client = *ShardClient::Create({cluster.address()});
  auto jobs = [&](int running, int waiting) {
    return WaitUntil([&] {
      auto s = client->Status();
      return s.ok() && s->jobs_running() == running &&
             s->jobs_waiting() == waiting;
    });
  };
  RawJob holder(cluster.address(), absl::Seconds(30));
  ASSERT_TRUE(jobs(1, 0));
  RawJob waiting(cluster.address(), absl::Seconds(30));
  ASSERT_TRUE(jobs(1, 1));

  std::thread drain([&] { cluster.DrainCoordinator(); });
  // Turned away at once, though the running job holds the drain: it never
  // started, so its client may safely send it again.
  const grpc::Status w = waiting.Drain(nullptr);
  EXPECT_EQ(w.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(w.error_message().find("never started"), std::string::npos)
      << w.error_message();
  std::vector<float> values;
  const grpc::Status h = holder.Complete(&values);
  EXPECT_TRUE(h.ok()) << h.error_message();
  EXPECT_EQ(values, (std::vector<float>{1, 2, 3, 4}));
  drain.join();
}

}  // namespace
}  // namespace shardmap
