// Tests of server/job_service: a client's job end to end through the real
// JobRunner, with a fake client stream and fake one-device workers that
// negate their argument, and no process or socket. A call refused before
// it began, idempotent replay of a call_id, the locks on
// resident arrays (writers exclude readers and writers; read-only states
// share), and the byte quota.
#include "server/job_service.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "tests/unit/fake_job_stream.h"
#include "tests/unit/negating_workers.h"
#include "tests/unit/status_matchers.h"
#include "tests/unit/wait_until.h"
#include "wire/chunking.h"
#include "wire/proto_convert.h"
#include "wire/signature.h"

namespace shardmap {
namespace {

constexpr char kAddress[] = "fake-worker:1";
// A bound on waits that must succeed; never reached when all is well.
constexpr absl::Duration kLong = absl::Seconds(20);
// How long a job that must wait for a lock is given before it gives up.
constexpr absl::Duration kBlocked = absl::Milliseconds(100);

v1::JobSpec Spec(const std::string& function, const Shape& shape) {
  v1::JobSpec spec;
  spec.set_function(function);
  *spec.mutable_mesh() = MeshToProto(*Mesh::Create({{"x", 1}}));
  *spec.add_args() = HeaderToProto(DType::kFloat32, shape);
  *spec.add_in_specs() = SpecToProto(PartitionSpec());
  *spec.add_out_specs() = SpecToProto(PartitionSpec());
  return spec;
}

// `spec` with its state slot "table" bound to the resident array "table".
v1::JobSpec WithTable(v1::JobSpec spec) {
  v1::StateBinding* b = spec.add_states();
  b->set_slot("table");
  b->set_name("table");
  return spec;
}

Tensor Floats(std::vector<float> values) {
  Tensor t(DType::kFloat32, {static_cast<int64_t>(values.size())});
  std::copy(values.begin(), values.end(), t.data_as<float>());
  return t;
}

std::vector<float> Values(const absl::StatusOr<Tensor>& t) {
  if (!t.ok()) return {};
  return std::vector<float>(t->data_as<float>(),
                            t->data_as<float>() + t->num_elements());
}

// A pool whose clock stands still: its worker never misses a heartbeat,
// however slowly a loaded machine runs the test.
WorkerPool::Options FrozenPool() {
  WorkerPool::Options options;
  options.clock = [now = absl::Now()] { return now; };
  return options;
}

class JobServiceTest : public ::testing::Test {
 protected:
  JobServiceTest()
      : pool_(FrozenPool()), index_([](const std::string&) { return true; }) {
    std::vector<v1::FunctionSignature> functions = {
        Signature("neg", 1).DTypes({DType::kFloat32}).proto(),
        Signature("read_table", 1)
            .DTypes({DType::kFloat32})
            .State("table", /*write=*/false)
            .proto(),
        Signature("add2", 2).DTypes({DType::kFloat32}).proto(),
        Signature("write_table", 1)
            .DTypes({DType::kFloat32})
            .State("table", /*write=*/true)
            .proto(),
    };
    worker_id_ = *pool_.Register(kAddress, 1, functions);
    ResidentArray table;
    table.name = "table";
    table.meta = ArrayMeta{DType::kFloat32, {4}};
    table.mesh = *Mesh::Create({{"x", 1}});
    table.worker_ids = {worker_id_};
    table.addresses = {kAddress};
    table.version = index_.NextVersion();
    index_.Commit(table);
  }

  // The service under test, made on first use with these options.
  JobService& Service(JobService::Options options = {}) {
    if (service_ == nullptr) {
      JobRunner::Options runner_options = runner_options_;
      runner_options.max_job_bytes = options.max_job_bytes;
      runner_ = std::make_unique<JobRunner>(runner_options, &workers_, &index_);
      service_ = std::make_unique<JobService>(options, &pool_, runner_.get(),
                                              &index_, &locks_, &calls_);
    }
    return *service_;
  }
  JobCall Call(absl::Duration timeout = kLong) {
    JobCall call;
    call.deadline = call.start + timeout;
    return call;
  }
  // Runs `spec` with argument `arg` on another thread; Join() gives its
  // status.
  struct Background {
    std::unique_ptr<FakeJobStream> stream;
    absl::Status status;
    std::thread thread;
    absl::Status Join() {
      thread.join();
      return status;
    }
  };
  std::unique_ptr<Background> Start(const v1::JobSpec& spec,
                                    const Tensor& arg) {
    auto b = std::make_unique<Background>();
    b->stream = std::make_unique<FakeJobStream>(spec, std::vector{&arg});
    Background* raw = b.get();
    JobService* service = &Service();
    b->thread = std::thread([this, raw, service] {
      raw->status = service->Run(Call(), raw->stream.get());
    });
    return b;
  }

  // The runner's options, but max_job_bytes (the service's), for tests
  // to set before the first Service().
  JobRunner::Options runner_options_;
  WorkerPool pool_;
  ResidentIndex index_;
  std::string worker_id_;
  NameLocks locks_;
  CallRegistry calls_{CallRegistry::Options{}};
  NegatingWorkers workers_;
  std::unique_ptr<JobRunner> runner_;
  std::unique_ptr<JobService> service_;
};

TEST_F(JobServiceTest, RunsAJobAndReturnsItsOutput) {
  const Tensor x = Floats({1, -2, 3.5, 0});
  FakeJobStream stream(Spec("neg", {4}), {&x});
  ASSERT_TRUE(Service().Run(Call(), &stream).ok());
  EXPECT_EQ(Values(stream.Output(0)), (std::vector<float>{-1, 2, -3.5, 0}));
  EXPECT_EQ(stream.result()->num_devices(), 1);
  EXPECT_EQ(Service().completed(), 1);
  EXPECT_EQ(Service().failed(), 0);
}

TEST_F(JobServiceTest, ASmallAnswerIsOneMessageWhenTheClientTakesIt) {
  v1::JobSpec spec = Spec("neg", {4});
  spec.set_inline_outputs(true);
  const Tensor x = Floats({1, -2, 3.5, 0});
  FakeJobStream stream(spec, {&x});
  ASSERT_TRUE(Service().Run(Call(), &stream).ok());
  EXPECT_EQ(stream.responses().size(), 1u);
  EXPECT_EQ(stream.result()->chunks_size(), 1);
  EXPECT_EQ(Values(stream.Output(0)), (std::vector<float>{-1, 2, -3.5, 0}));

  // Over kInlineChunkBytes, the chunks follow the result as messages.
  const int64_t n = kInlineChunkBytes / sizeof(float) + 1;
  std::vector<float> big(n), want(n);
  for (int64_t i = 0; i < n; ++i) {
    big[i] = 0.5f * i - 3;
    want[i] = -big[i];
  }
  const Tensor y = Floats(big);
  v1::JobSpec big_spec = Spec("neg", {n});
  big_spec.set_inline_outputs(true);
  FakeJobStream big_stream(big_spec, {&y});
  ASSERT_TRUE(Service().Run(Call(), &big_stream).ok());
  EXPECT_EQ(big_stream.result()->chunks_size(), 0);
  EXPECT_EQ(big_stream.responses().size(), 2u);
  EXPECT_EQ(Values(big_stream.Output(0)), want);
}

// A call refused before it began (the drain gate, a full job queue: the
// glue decides) fails with that status, reads nothing, starts nothing and
// counts as failed.
TEST_F(JobServiceTest, ACallRefusedBeforeItBeganFailsWithoutReading) {
  const Tensor x = Floats({1, 2, 3, 4});
  FakeJobStream refused_stream(Spec("neg", {4}), {&x});
  JobCall call = Call();
  call.refused = absl::ResourceExhaustedError("the job queue is full");
  EXPECT_TRUE(StatusIs(Service().Run(call, &refused_stream),
                       absl::StatusCode::kResourceExhausted,
                       {"the job queue is full"}));
  EXPECT_EQ(refused_stream.reads(), 0u);
  EXPECT_EQ(workers_.opened(), 0);
  EXPECT_EQ(Service().failed(), 1);

  FakeJobStream next(Spec("neg", {4}), {&x});
  ASSERT_TRUE(Service().Run(Call(), &next).ok());
  EXPECT_EQ(Values(next.Output(0)), (std::vector<float>{-1, -2, -3, -4}));
  EXPECT_EQ(Service().completed(), 1);
}

TEST_F(JobServiceTest, AnswersARetryOfACallIdFromItsFirstRun) {
  v1::JobSpec spec = Spec("neg", {3});
  spec.set_call_id("call-1");
  const Tensor x = Floats({5, 6, 7});
  FakeJobStream first(spec, {&x});
  ASSERT_TRUE(Service().Run(Call(), &first).ok());
  FakeJobStream retry(spec, {&x});
  ASSERT_TRUE(Service().Run(Call(), &retry).ok());

  EXPECT_EQ(workers_.opened(), 1);  // ran once
  EXPECT_EQ(Values(retry.Output(0)), (std::vector<float>{-5, -6, -7}));
  EXPECT_EQ(retry.result()->job_id(), first.result()->job_id());
  EXPECT_EQ(retry.responses().size(), 2u);  // the result, then the chunk

  // A retry from a client that takes small outputs inside the result
  // (JobSpec.inline_outputs) is the same request: answered from the first
  // run, in one message.
  spec.set_inline_outputs(true);
  FakeJobStream inline_retry(spec, {&x});
  ASSERT_TRUE(Service().Run(Call(), &inline_retry).ok());
  EXPECT_EQ(workers_.opened(), 1);
  EXPECT_EQ(inline_retry.responses().size(), 1u);
  EXPECT_EQ(Values(inline_retry.Output(0)), (std::vector<float>{-5, -6, -7}));
  EXPECT_EQ(Service().completed(), 1);  // a replay is not a second job
}

TEST_F(JobServiceTest, RefusesAnotherRequestUnderAUsedCallId) {
  v1::JobSpec spec = Spec("neg", {3});
  spec.set_call_id("call-1");
  const Tensor x = Floats({5, 6, 7});
  FakeJobStream first(spec, {&x});
  ASSERT_TRUE(Service().Run(Call(), &first).ok());

  v1::JobSpec other = Spec("neg", {2});
  other.set_call_id("call-1");
  const Tensor y = Floats({5, 6});
  FakeJobStream another_spec(other, {&y});
  EXPECT_TRUE(StatusIs(Service().Run(Call(), &another_spec),
                       absl::StatusCode::kInvalidArgument,
                       {"call_id 'call-1'", "another request", "job neg"}));

  const Tensor z = Floats({5, 6, 8});
  FakeJobStream other_data(spec, {&z});
  EXPECT_TRUE(StatusIs(Service().Run(Call(), &other_data),
                       absl::StatusCode::kInvalidArgument,
                       {"call_id 'call-1'", "other argument data"}));
  EXPECT_TRUE(other_data.responses().empty());
  EXPECT_EQ(workers_.opened(), 1);
}

// A job that writes the array excludes every other job using it until it
// ends: one that asks meanwhile waits, and fails at its deadline.
TEST_F(JobServiceTest, AWriterOfAnArrayExcludesItsReadersAndWriters) {
  for (const char* second : {"read_table", "write_table"}) {
    SCOPED_TRACE(second);
    workers_.HoldNext(1);
    const Tensor x = Floats({1, 2, 3, 4});
    auto writer = Start(WithTable(Spec("write_table", {4})), x);
    ASSERT_TRUE(WaitUntil([&] { return workers_.waiting() == 1; }));
    const int opened = workers_.opened();

    FakeJobStream other(WithTable(Spec(second, {4})), {&x});
    EXPECT_TRUE(StatusIs(
        Service().Run(Call(kBlocked), &other),
        absl::StatusCode::kDeadlineExceeded,
        {"other jobs using the same resident arrays", "'table' was in use"}));
    EXPECT_EQ(workers_.opened(), opened);  // it never reached a worker

    workers_.Release();
    ASSERT_TRUE(writer->Join().ok());
    EXPECT_EQ(Values(writer->stream->Output(0)),
              (std::vector<float>{-1, -2, -3, -4}));
  }
}

// And the other way round: a writer waits for the job reading the array.
TEST_F(JobServiceTest, AReaderOfAnArrayExcludesItsWriters) {
  workers_.HoldNext(1);
  const Tensor x = Floats({1, 2, 3, 4});
  auto reader = Start(WithTable(Spec("read_table", {4})), x);
  ASSERT_TRUE(WaitUntil([&] { return workers_.waiting() == 1; }));

  FakeJobStream writer(WithTable(Spec("write_table", {4})), {&x});
  EXPECT_TRUE(StatusIs(Service().Run(Call(kBlocked), &writer),
                       absl::StatusCode::kDeadlineExceeded,
                       {"'table' was in use"}));
  workers_.Release();
  ASSERT_TRUE(reader->Join().ok());
}

// A state slot the function only reads takes a read lock: two such jobs
// on one array run at once (the second ends while the first still runs).
TEST_F(JobServiceTest, JobsThatOnlyReadAStateShareIt) {
  workers_.HoldNext(1);
  const Tensor x = Floats({1, 2, 3, 4});
  auto first = Start(WithTable(Spec("read_table", {4})), x);
  ASSERT_TRUE(WaitUntil([&] { return workers_.waiting() == 1; }));

  const Tensor y = Floats({9, 8, 7, 6});
  FakeJobStream second(WithTable(Spec("read_table", {4})), {&y});
  ASSERT_TRUE(Service().Run(Call(), &second).ok());
  EXPECT_EQ(Values(second.Output(0)), (std::vector<float>{-9, -8, -7, -6}));
  EXPECT_EQ(workers_.waiting(), 1);  // the first still runs

  workers_.Release();
  ASSERT_TRUE(first->Join().ok());
  EXPECT_EQ(Values(first->stream->Output(0)),
            (std::vector<float>{-1, -2, -3, -4}));
}

// The arguments alone over --max-job-bytes are refused before any of their
// data is read; the job runner adds the returned outputs to them.
TEST_F(JobServiceTest, RefusesArgumentsOverTheByteQuota) {
  JobService::Options options;
  options.max_job_bytes = 20;  // five float32
  Service(options);
  const Tensor x = Floats({1, 2, 3, 4, 5, 6});
  FakeJobStream over(Spec("neg", {6}), {&x});
  EXPECT_TRUE(StatusIs(
      Service().Run(Call(), &over), absl::StatusCode::kResourceExhausted,
      {"arguments total 24 bytes", "--max-job-bytes of 20 bytes"}));
  EXPECT_EQ(over.reads(), 1u);  // the JobSpec, none of the data
  EXPECT_EQ(workers_.opened(), 0);

  const Tensor y = Floats({1, 2});  // 8 bytes in, 8 returned
  FakeJobStream under(Spec("neg", {2}), {&y});
  ASSERT_TRUE(Service().Run(Call(), &under).ok());
  EXPECT_EQ(Values(under.Output(0)), (std::vector<float>{-1, -2}));
}

// Cut-through: the worker gets the first chunk of its block while the
// client's last chunk is still on its way. The client here sends its last
// chunk only once a worker has received one (or gives up after kLong, and
// the test fails).
TEST_F(JobServiceTest, ForwardsArgumentChunksBeforeTheLastArrives) {
  const size_t n = 3 * kChunkBytes / sizeof(float);  // three chunks
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i % 1000);
  const Tensor x = Floats(v);
  FakeJobStream stream(Spec("neg", {static_cast<int64_t>(n)}), {&x});
  ASSERT_EQ(stream.requests().size(), 4u);  // the JobSpec, three chunks
  bool forwarded = false;
  stream.BeforeRead([&](size_t i) {
    if (i == 3) forwarded = workers_.AwaitChunks(1, kLong);
    return true;
  });
  ASSERT_TRUE(Service().Run(Call(), &stream).ok());
  EXPECT_TRUE(forwarded);
  const std::vector<float> out = Values(stream.Output(0));
  ASSERT_EQ(out.size(), n);
  for (size_t i = 0; i < n; i += 4099) EXPECT_EQ(out[i], -v[i]) << i;
  EXPECT_EQ(out[n - 1], -v[n - 1]);
}

// A client whose chunks go wrong after the devices started fails the job
// with its own error, not the cancellation it causes on the workers.
TEST_F(JobServiceTest, AChunkOutOfOrderMidUploadFailsTheJobWithItsError) {
  const size_t n = 3 * kChunkBytes / sizeof(float);
  const Tensor x = Floats(std::vector<float>(n, 1.0f));
  FakeJobStream stream(Spec("neg", {static_cast<int64_t>(n)}), {&x});
  stream.requests()[3].mutable_chunk()->set_offset(0);
  EXPECT_TRUE(StatusIs(Service().Run(Call(), &stream),
                       absl::StatusCode::kInvalidArgument,
                       {"chunk out of order", "argument 0 at offset 0"}));
  EXPECT_EQ(workers_.opened(), 1);
  EXPECT_EQ(workers_.cancelled(), 1);  // its worker's call was ended
  EXPECT_EQ(Service().failed(), 1);
}

// A client that stops sending midway fails the job: the device waiting for
// the rest of its block learns it, and the error says what was missing.
TEST_F(JobServiceTest, AClientThatStopsMidUploadFailsTheJob) {
  const size_t n = 3 * kChunkBytes / sizeof(float);
  const Tensor x = Floats(std::vector<float>(n, 1.0f));
  FakeJobStream stream(Spec("neg", {static_cast<int64_t>(n)}), {&x});
  stream.BeforeRead([](size_t i) { return i < 3; });
  EXPECT_TRUE(StatusIs(Service().Run(Call(), &stream),
                       absl::StatusCode::kInvalidArgument,
                       {"stream ended early",
                        "argument 0 has 2097152 of its "
                        "3145728 bytes"}));
  EXPECT_EQ(workers_.cancelled(), 1);
}

// A job that donates a resident array receives its whole arguments before
// it starts: a broken upload must fail it before any worker could consume
// the donation, so the array is not lost. `add2(@table, x)` stored back
// into table, donating it; x's upload breaks at its last chunk.
TEST_F(JobServiceTest, AJobThatDonatesReceivesItsArgumentsBeforeItStarts) {
  const size_t n = 3 * kChunkBytes / sizeof(float);
  const Tensor x = Floats(std::vector<float>(n, 1.0f));
  auto donating = [&] {
    v1::JobSpec spec;
    spec.set_function("add2");
    *spec.mutable_mesh() = MeshToProto(*Mesh::Create({{"x", 1}}));
    *spec.add_args() = HeaderToProto(DType::kFloat32, {4});
    *spec.add_args() =
        HeaderToProto(DType::kFloat32, {static_cast<int64_t>(n)});
    spec.add_resident_args("table");
    spec.add_resident_args("");
    *spec.add_in_specs() = SpecToProto(PartitionSpec());
    *spec.add_out_specs() = SpecToProto(PartitionSpec());
    spec.add_resident_outputs("table");
    spec.add_donate_args(0);
    return spec;
  };
  // Only x's chunks travel: arguments are numbered by position.
  const Tensor none(DType::kFloat32, {0});
  FakeJobStream broken(donating(), {&none, &x});
  broken.requests()[3].mutable_chunk()->set_offset(0);
  EXPECT_TRUE(StatusIs(Service().Run(Call(), &broken),
                       absl::StatusCode::kInvalidArgument,
                       {"chunk out of order"}));
  EXPECT_EQ(workers_.opened(), 0);
  EXPECT_TRUE(index_.Find("table").ok());  // not lost

  FakeJobStream whole(donating(), {&none, &x});
  const absl::Status ran = Service().Run(Call(), &whole);
  EXPECT_TRUE(ran.ok()) << ran;
  EXPECT_EQ(workers_.opened(), 1);
}

// Values 0, 1, ... 999, 0, ... over `chunks` chunks of float32.
Tensor Ramp(size_t chunks) {
  const size_t n = chunks * kChunkBytes / sizeof(float);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i % 1000);
  return Floats(v);
}

// Cut-through outputs: the client gets the result and the first chunk of
// the output while the worker still holds its last chunk back (until the
// test releases it, so what was written before happened mid-job); the
// last chunk leaves with the call's status.
TEST_F(JobServiceTest, StreamsOutputChunksBeforeTheWorkerIsDone) {
  const Tensor x = Ramp(3);
  Service();
  workers_.HoldLastNext(1);
  auto job = Start(Spec("neg", x.shape()), x);
  // The result, then the first chunk (the second is held behind it).
  const bool streamed =
      WaitUntil([&] { return job->stream->writes() >= 2; }, kLong);
  EXPECT_TRUE(WaitUntil([&] { return workers_.waiting() == 1; }, kLong));
  workers_.Release();
  ASSERT_TRUE(job->Join().ok());
  EXPECT_TRUE(streamed);
  EXPECT_TRUE(job->stream->wrote_last());
  const absl::StatusOr<Tensor> out = job->stream->Output(0);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->num_elements(), x.num_elements());
  for (int64_t i = 0; i < x.num_elements(); ++i) {
    ASSERT_EQ(out->data_as<float>()[i], -x.data_as<float>()[i]) << i;
  }
}

// A client that leaves while its outputs stream never gets a whole
// answer: the worker is cancelled, the job fails, and the chunk held back
// for the status never goes out.
TEST_F(JobServiceTest, AJobCancelledWhileItsOutputsStreamSendsNoLastChunk) {
  const Tensor x = Ramp(3);
  Service();
  workers_.HoldLastNext(1);
  auto job = Start(Spec("neg", x.shape()), x);
  ASSERT_TRUE(WaitUntil([&] { return job->stream->writes() >= 2; }, kLong));
  job->stream->Cancel();
  EXPECT_TRUE(StatusIs(job->Join(), absl::StatusCode::kCancelled, {}));
  EXPECT_EQ(workers_.cancelled(), 1);
  EXPECT_FALSE(job->stream->wrote_last());
  EXPECT_FALSE(job->stream->Output(0).ok());
}

// A job with a call_id, or one that reads a resident array, does not
// stream (MayStreamOutputs says which): nothing reaches its client while
// the worker still holds its last chunk back, and the whole reply comes
// once the devices are done.
TEST_F(JobServiceTest, JobsThatHoldStateReplyOnlyOnceTheirDevicesAreDone) {
  const Tensor x = Ramp(3);
  Service();
  v1::JobSpec keyed = Spec("neg", x.shape());
  keyed.set_call_id("keyed-1");
  for (const v1::JobSpec& spec :
       {keyed, WithTable(Spec("read_table", x.shape()))}) {
    SCOPED_TRACE(spec.function());
    workers_.HoldLastNext(1);
    auto job = Start(spec, x);
    ASSERT_TRUE(WaitUntil([&] { return workers_.waiting() == 1; }, kLong));
    EXPECT_EQ(job->stream->writes(), 0u);
    workers_.Release();
    ASSERT_TRUE(job->Join().ok());
    EXPECT_TRUE(job->stream->wrote_last());
    const absl::StatusOr<Tensor> out = job->stream->Output(0);
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_EQ(out->num_elements(), x.num_elements());
    EXPECT_EQ(out->data_as<float>()[12345], -x.data_as<float>()[12345]);
  }
}

// A worker found lost while the outputs stream ends the job with
// UNAVAILABLE: the waits for its bytes run the job's liveness check, and
// the chunk held back for the status never goes out.
TEST_F(JobServiceTest, AWorkerLostWhileItsOutputsStreamFailsTheJob) {
  // Shared with the runner, which outlives this test's body.
  auto lost = std::make_shared<std::atomic<bool>>(false);
  runner_options_.liveness_poll = absl::Milliseconds(5);
  runner_options_.check_live = [lost](const WorkerPool::Worker& w) {
    return *lost ? absl::UnavailableError(
                       absl::StrCat("worker ", w.id, " stopped answering"))
                 : absl::OkStatus();
  };
  const Tensor x = Ramp(3);
  Service();
  workers_.HoldLastNext(1);
  auto job = Start(Spec("neg", x.shape()), x);
  ASSERT_TRUE(WaitUntil([&] { return job->stream->writes() >= 2; }, kLong));
  *lost = true;
  EXPECT_TRUE(StatusIs(job->Join(), absl::StatusCode::kUnavailable,
                       {"stopped answering"}));
  EXPECT_EQ(workers_.cancelled(), 1);
  EXPECT_FALSE(job->stream->wrote_last());
  EXPECT_FALSE(job->stream->Output(0).ok());
}

}  // namespace
}  // namespace shardmap
