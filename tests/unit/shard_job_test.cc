// Tests of worker/shard_job: receiving a job, its turn among the worker's
// jobs, running it and sending its outputs, over a fake stream (see
// tests/unit/shard_job_fixture.h). References are plain loops.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "tests/unit/shard_job_fixture.h"

namespace shardmap {
namespace {

TEST_F(ShardJobTest, RunsTheFunctionAndSendsItsOutputs) {
  FakeShardStream stream;
  const std::vector<float> x = {1.5f, -2, 3, 40};
  Send(stream, Header("job-1", 0, x), x);
  ASSERT_TRUE(RunJob(stream).ok());
  absl::StatusOr<std::vector<Tensor>> outputs = Outputs(stream);
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  ASSERT_EQ(outputs->size(), 1u);
  EXPECT_EQ(Values((*outputs)[0]), PlusOne(x));
  // A one-phase job stores nothing.
  EXPECT_TRUE(store_->All().empty());
}

TEST_F(ShardJobTest, AResidentArgumentIsReadFromItsHolder) {
  // "p" = {4, 5, 6, 7}, replicated over x=2 and held here: device 0 of the
  // job reads it instead of receiving chunks, and reports the digest of
  // what it read (the coordinator compares the replicas').
  const std::vector<float> p = {4, 5, 6, 7};
  ResidentStore::Block block;
  block.version = 2;
  block.box = Box{{0}, {4}};
  block.data = std::make_shared<const Tensor>(Floats(p));
  ASSERT_TRUE(store_->Put("p", block).ok());
  const v1::Mesh mesh = MeshToProto(*Mesh::Parse("x=2"));
  FakeShardStream stream;
  v1::ShardJob header = Header("job-a", 0, {});
  *header.mutable_mesh() = mesh;
  v1::ResidentSource* source = header.add_resident_args();
  source->set_name("p");
  source->set_version(2);
  *source->mutable_header() = HeaderToProto(DType::kFloat32, {4});
  *source->mutable_mesh() = mesh;
  source->add_holders(peers_.my_address());
  source->add_holders(peers_.my_address());
  v1::ShardRequest request;
  *request.mutable_job() = header;
  stream.Push(request);
  ASSERT_TRUE(RunJob(stream).ok());
  absl::StatusOr<std::vector<Tensor>> outputs = Outputs(stream);
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  EXPECT_EQ(Values((*outputs)[0]), PlusOne(p));
  const std::vector<v1::ShardResponse> written = stream.written();
  const v1::ShardOutputs& described = written[0].outputs();
  ASSERT_EQ(described.resident_arg_digests_size(), 1);
  EXPECT_EQ(described.resident_arg_digests(0), Digest(Floats(p)));
}

TEST_F(ShardJobTest, AnOutputNotAskedForGoesAsItsHeaderOnly) {
  FakeShardStream stream;
  const std::vector<float> x = {1, 2};
  v1::ShardJob header = Header("job-1", 0, x);
  header.add_send_outputs(false);
  Send(stream, header, x);
  ASSERT_TRUE(RunJob(stream).ok());
  std::vector<v1::ShardResponse> written = stream.written();
  ASSERT_EQ(written.size(), 1u);
  ASSERT_EQ(written[0].outputs().outputs_size(), 1);
  EXPECT_EQ(written[0].outputs().outputs(0).shape(0), 2);
}

// An output whose copies the coordinator will not compare is not hashed.
TEST_F(ShardJobTest, HashesOnlyTheOutputsTheCoordinatorCompares) {
  const std::vector<float> x = {1, 2, 3};
  for (const bool skip : {false, true}) {
    FakeShardStream stream;
    v1::ShardJob header = Header("job-1", skip ? 1 : 0, x);
    header.add_skip_output_digests(skip);
    Send(stream, header, x);
    ASSERT_TRUE(RunJob(stream).ok());
    const std::vector<v1::ShardResponse> written = stream.written();
    ASSERT_FALSE(written.empty());
    ASSERT_EQ(written[0].outputs().digests_size(), 1);
    EXPECT_EQ(written[0].outputs().digests(0),
              skip ? 0 : Digest(Floats(PlusOne(x))))
        << "skip " << skip;
  }
}

TEST_F(ShardJobTest, AJobWaitsForTheTicketBeforeIt) {
  // Ticket 1 arrives first and must wait until ticket 0 has run.
  FakeShardStream second;
  std::atomic<bool> waiting{false};
  second.set_on_cancelled_check([&] {
    if (runs_ == 0) waiting = true;
    return false;
  });
  Send(second, Header("job-b", 1, {20}), {20});
  std::atomic<bool> second_done{false};
  absl::Status second_status;
  std::thread t([&] {
    second_status = RunJob(second);
    second_done = true;
  });
  ASSERT_TRUE(WaitUntil([&] { return waiting || second_done; }));
  EXPECT_FALSE(second_done) << "ticket 1 ran before ticket 0";
  EXPECT_EQ(runs_, 0);

  FakeShardStream first;
  Send(first, Header("job-a", 0, {10}), {10});
  EXPECT_TRUE(RunJob(first).ok());
  t.join();
  EXPECT_TRUE(second_status.ok()) << second_status;
  EXPECT_EQ(ran(), (std::vector<float>{10, 20}));
  absl::StatusOr<std::vector<Tensor>> out = Outputs(second);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values((*out)[0]), PlusOne({20}));
}

TEST_F(ShardJobTest, ASkippedTicketLetsTheNextGo) {
  sequencer_.Skip("worker-a", 0);
  EXPECT_TRUE(NextRunsWithoutWaiting(5));
  EXPECT_EQ(ran(), (std::vector<float>{5}));
}

TEST_F(ShardJobTest, AJobThatCannotBeReceivedGivesItsTicketUp) {
  // Ticket 0's argument header is bad: the job never runs, and ticket 1
  // does not wait for it.
  FakeShardStream bad;
  v1::ShardJob header = Header("job-a", 0, {1});
  header.mutable_args(0)->set_shape(0, -5);
  Send(bad, header, {1});
  EXPECT_TRUE(
      StatusIs(RunJob(bad), absl::StatusCode::kInvalidArgument, {"args[0]"}));

  EXPECT_TRUE(NextRunsWithoutWaiting(7))
      << "ticket 1 waited for the ticket of a failed receive";
  EXPECT_EQ(ran(), (std::vector<float>{7}));
}

TEST_F(ShardJobTest, AFailedJobHandsItsTurnOn) {
  FakeShardStream failing;
  Send(failing, Header("job-a", 0, {1}, "refuse"), {1});
  EXPECT_TRUE(StatusIs(RunJob(failing), absl::StatusCode::kFailedPrecondition,
                       {"refuse: not today"}));
  EXPECT_TRUE(NextRunsWithoutWaiting(2));
}

TEST_F(ShardJobTest, AStreamWithoutAHeaderIsRefused) {
  FakeShardStream empty;
  empty.Close();
  EXPECT_TRUE(StatusIs(RunJob(empty), absl::StatusCode::kInvalidArgument,
                       {"must start with a ShardJob"}));
  FakeShardStream chunk_first;
  v1::ShardRequest chunk;
  chunk.mutable_chunk()->set_index(0);
  chunk_first.Push(chunk);
  EXPECT_TRUE(StatusIs(RunJob(chunk_first), absl::StatusCode::kInvalidArgument,
                       {"must start with a ShardJob"}));
  EXPECT_EQ(runs_, 0);
}

TEST_F(ShardJobTest, ABadArgumentBlockNamesTheArgument) {
  // Chunks for an argument the job does not have.
  FakeShardStream unknown;
  v1::ShardRequest request;
  *request.mutable_job() = Header("job-a", 0, {1, 2});
  unknown.Push(request);
  v1::ShardRequest chunk;
  chunk.mutable_chunk()->set_index(3);
  chunk.mutable_chunk()->set_data(std::string(8, '\0'));
  unknown.Push(chunk);
  EXPECT_TRUE(StatusIs(RunJob(unknown), absl::StatusCode::kInvalidArgument,
                       {"argument 3"}));

  // The stream ends before the argument's last byte.
  FakeShardStream short_stream;
  *request.mutable_job() = Header("job-b", 1, {1, 2});
  short_stream.Push(request);
  chunk.mutable_chunk()->set_index(0);
  chunk.mutable_chunk()->set_data(std::string(4, '\0'));
  short_stream.Push(chunk);
  short_stream.Close();
  EXPECT_TRUE(StatusIs(RunJob(short_stream), absl::StatusCode::kInvalidArgument,
                       {"stream ended early", "argument 0"}));

  // A second header where a chunk belongs.
  FakeShardStream twice;
  *request.mutable_job() = Header("job-c", 2, {1});
  twice.Push(request);
  twice.Push(request);
  EXPECT_TRUE(StatusIs(RunJob(twice), absl::StatusCode::kInvalidArgument,
                       {"a second ShardJob"}));
  EXPECT_EQ(runs_, 0);
  EXPECT_TRUE(twice.written().empty());
}

TEST_F(ShardJobTest, ArgumentsOverTheLimitsAreRefusedBeforeAllocating) {
  FakeShardStream stream;
  Send(stream, Header("job-a", 0, {1, 2, 3, 4}), {1, 2, 3, 4});
  ShardJob::Options options;
  options.max_job_bytes = 15;
  ShardJob job(options, services(), &stream, absl::Now() + absl::Seconds(60));
  EXPECT_TRUE(StatusIs(job.Receive(), absl::StatusCode::kResourceExhausted,
                       {"job job-a", "more than 15 argument bytes"}));

  MemoryBudget budget(8, nullptr);
  budget_ = &budget;
  FakeShardStream over_budget;
  Send(over_budget, Header("job-b", 1, {1, 2, 3}), {1, 2, 3});
  EXPECT_TRUE(StatusIs(RunJob(over_budget),
                       absl::StatusCode::kResourceExhausted,
                       {"job-b device 0's arguments"}));
  EXPECT_EQ(budget.reserved(), 0u);
  EXPECT_EQ(runs_, 0);
}

TEST_F(ShardJobTest, OutputBytesStayReservedWhileGrpcHoldsThem) {
  MemoryBudget budget(1 << 20, nullptr);
  budget_ = &budget;
  FakeShardStream stream;
  stream.KeepLent();
  const std::vector<float> x = {1, 2, 3, 4};
  Send(stream, Header("job-a", 0, x), x);
  ASSERT_TRUE(RunJob(stream).ok());
  // The job is over, but its output's 16 bytes are still lent.
  EXPECT_EQ(budget.reserved(), 16u);
  stream.ReleaseLent();
  EXPECT_EQ(budget.reserved(), 0u);
  absl::StatusOr<std::vector<Tensor>> outputs = Outputs(stream);
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  EXPECT_EQ(Values((*outputs)[0]), PlusOne(x));
}

TEST_F(ShardJobTest, AJobForAnEarlierProcessIsRefused) {
  FakeJobPeers restarted(/*incarnation=*/9);
  FakeShardStream stream;
  v1::ShardJob header = Header("job-a", 0, {1});
  header.add_device_incarnations(4);
  Send(stream, header, {1});
  ShardJob::Services s = services();
  s.peers = &restarted;
  ShardJob job(ShardJob::Options{}, s, &stream,
               absl::Now() + absl::Seconds(60));
  ASSERT_TRUE(job.Receive().ok());
  EXPECT_TRUE(StatusIs(job.Run(), absl::StatusCode::kAborted,
                       {"job-a", "incarnation 4; this one is 9"}));
  EXPECT_EQ(runs_, 0);
}

}  // namespace
}  // namespace shardmap
