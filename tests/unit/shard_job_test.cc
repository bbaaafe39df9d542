// Tests of worker/shard_job: one device's job from its stream to its end,
// without gRPC: a fake stream, fake peers (no collectives), the real
// JobSequencer and ResidentStore, and kernels registered here.
//
// The job order is observed without timing: a job waiting its turn asks
// the stream whether it was cancelled (JobSequencer::Enter polls it), and a
// job that runs asks only after its kernel ran; so a cancelled() call
// before any kernel ran is a job waiting. References are plain loops.
#include "worker/shard_job.h"

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "core/digest.h"
#include "core/status_util.h"
#include "tests/unit/status_matchers.h"
#include "tests/unit/temp_dir.h"
#include "tests/unit/wait_until.h"
#include "wire/chunking.h"
#include "wire/proto_convert.h"
#include "wire/signature.h"
#include "worker/functions/function_registry.h"

namespace shardmap {
namespace {

namespace fs = std::filesystem;

// A RunShard stream: requests the test queues, responses it records.
class FakeShardStream final : public ShardStream {
 public:
  void Push(v1::ShardRequest request) {
    absl::MutexLock lock(&mu_);
    requests_.push_back(std::move(request));
  }
  // The coordinator closes its side: Read returns false once drained.
  void Close() {
    absl::MutexLock lock(&mu_);
    closed_ = true;
  }
  // The call is cancelled: cancelled() is true and Read returns false.
  void Cancel() {
    cancel_ = true;
    absl::MutexLock lock(&mu_);
    closed_ = true;
  }
  // Consulted by every cancelled() call; true cancels the call.
  void set_on_cancelled_check(std::function<bool()> check) {
    on_check_ = std::move(check);
  }
  // Writes fail from the `n`th on (0: all).
  void FailWritesFrom(int n) { fail_writes_from_ = n; }

  bool Read(v1::ShardRequest* request) override {
    absl::MutexLock lock(&mu_);
    auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !requests_.empty() || closed_;
    };
    // Bounded: a job that waits for a decision the test never sends
    // fails the test instead of hanging it.
    if (!mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Seconds(60)) ||
        requests_.empty()) {
      return false;
    }
    *request = std::move(requests_.front());
    requests_.pop_front();
    return true;
  }
  bool Write(const v1::ShardResponse& response) override {
    absl::MutexLock lock(&mu_);
    if (fail_writes_from_ >= 0 &&
        static_cast<int>(written_.size()) >= fail_writes_from_) {
      return false;
    }
    written_.push_back(response);
    return true;
  }
  bool cancelled() const override {
    if (on_check_ && on_check_()) cancel_ = true;
    return cancel_;
  }

  std::vector<v1::ShardResponse> written() const {
    absl::MutexLock lock(&mu_);
    return written_;
  }

 private:
  mutable absl::Mutex mu_;
  std::deque<v1::ShardRequest> requests_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<v1::ShardResponse> written_ ABSL_GUARDED_BY(mu_);
  int fail_writes_from_ = -1;
  std::function<bool()> on_check_;
  mutable std::atomic<bool> cancel_{false};
};

// No other workers: jobs run without collectives, and nothing is remote.
class FakeJobPeers final : public JobPeers {
 public:
  explicit FakeJobPeers(uint64_t incarnation = 0) : incarnation_(incarnation) {}
  uint64_t incarnation() const override { return incarnation_; }
  std::string my_address() const override { return "me:1"; }
  std::unique_ptr<PeerTransport> Open(const v1::ShardJob&,
                                      const Link&) override {
    return nullptr;
  }
  absl::StatusOr<std::string> ReadBlock(const std::string& address,
                                        const v1::ReadBlockRequest&,
                                        absl::Time) override {
    return absl::UnavailableError("no worker at " + address);
  }

 private:
  const uint64_t incarnation_;
};

Tensor Floats(const std::vector<float>& values) {
  Tensor t(DType::kFloat32, {static_cast<int64_t>(values.size())});
  for (size_t i = 0; i < values.size(); ++i) t.data_as<float>()[i] = values[i];
  return t;
}

std::vector<float> Values(const Tensor& t) {
  const float* p = t.data_as<float>();
  return std::vector<float>(p, p + t.num_elements());
}

// x + 1, element by element: the reference the kernel is checked against.
std::vector<float> PlusOne(std::vector<float> x) {
  for (float& v : x) v += 1;
  return x;
}

class ShardJobTest : public ::testing::Test {
 protected:
  ShardJobTest() {
    spdlog::set_level(spdlog::level::off);
    // add_one(x) = x + 1; it logs x[0], so a test sees which jobs ran and
    // in what order.
    MustRegister(
        registry_, Signature("add_one", 1),
        [this](const CallContext&, std::vector<Tensor>& args,
               const nlohmann::json&) -> absl::StatusOr<std::vector<Tensor>> {
          std::vector<float> x = Values(args[0]);
          {
            absl::MutexLock lock(&mu_);
            ran_.push_back(x.empty() ? -1 : x[0]);
          }
          ++runs_;
          std::vector<Tensor> out;
          out.push_back(Floats(PlusOne(x)));
          return out;
        });
    MustRegister(
        registry_, Signature("refuse", 1),
        [this](const CallContext&, std::vector<Tensor>&,
               const nlohmann::json&) -> absl::StatusOr<std::vector<Tensor>> {
          ++runs_;
          return absl::FailedPreconditionError("refuse: not today");
        });
  }

  // The header of a job of `function` over `x` on a one-device mesh.
  static v1::ShardJob Header(const std::string& job_id, uint64_t ticket,
                             const std::vector<float>& x,
                             const std::string& function = "add_one") {
    v1::ShardJob job;
    job.set_job_id(job_id);
    job.set_function(function);
    *job.mutable_mesh() = MeshToProto(*Mesh::Parse("x=1"));
    job.set_device_id(0);
    *job.add_args() =
        HeaderToProto(DType::kFloat32, Shape{static_cast<int64_t>(x.size())});
    job.set_worker_id("worker-a");
    job.set_ticket(ticket);
    return job;
  }

  // Makes the job store its output as resident array `name` version 1,
  // two-phase.
  static void StoreOutput(v1::ShardJob* job, const std::string& name) {
    v1::ResidentTarget* target = job->add_resident_outputs();
    target->set_name(name);
    target->set_version(1);
    job->set_two_phase(true);
  }

  // Queues the header and `x` as argument chunks.
  static void Send(FakeShardStream& stream, const v1::ShardJob& header,
                   const std::vector<float>& x) {
    v1::ShardRequest request;
    *request.mutable_job() = header;
    stream.Push(request);
    SendTensorChunks(0, Floats(x), [&stream](v1::ArrayChunk&& chunk) {
      v1::ShardRequest r;
      *r.mutable_chunk() = std::move(chunk);
      stream.Push(std::move(r));
      return true;
    });
  }

  static void Decide(FakeShardStream& stream, bool commit) {
    v1::ShardRequest request;
    request.mutable_decision()->set_commit(commit);
    stream.Push(request);
  }

  // Queues `job_id` of `ticket`: `function` over {3}, its output stored
  // as "r", two-phase.
  static void SendStoringJob(FakeShardStream& stream,
                             const std::string& function = "add_one",
                             const std::string& job_id = "job-a",
                             uint64_t ticket = 0) {
    v1::ShardJob header = Header(job_id, ticket, {3}, function);
    StoreOutput(&header, "r");
    Send(stream, header, {3});
  }

  // Nothing of `job_id` is stored, and nothing is left staged for a later
  // commit.
  void ExpectNothingStored(const std::string& job_id = "job-a") {
    EXPECT_TRUE(store_->Commit(job_id).ok());
    EXPECT_TRUE(store_->All().empty());
  }

  ShardJob::Services services() {
    return {&executor_, &peers_, store_, &sequencer_, budget_};
  }

  // Receives and runs one job from `stream`; the first error of the two.
  absl::Status RunJob(FakeShardStream& stream,
                      absl::Duration timeout = absl::Seconds(60)) {
    ShardJob job(ShardJob::Options{}, services(), &stream,
                 absl::Now() + timeout);
    SHARD_RETURN_IF_ERROR(job.Receive());
    return job.Run();
  }

  // The outputs a stream carried back: the headers, then the chunks.
  static absl::StatusOr<std::vector<Tensor>> Outputs(
      const FakeShardStream& stream) {
    std::vector<v1::ShardResponse> written = stream.written();
    if (written.empty() || !written[0].has_outputs()) {
      return absl::NotFoundError("no outputs written");
    }
    std::vector<Tensor> outputs;
    for (const v1::ArrayHeader& h : written[0].outputs().outputs()) {
      SHARD_ASSIGN_OR_RETURN(ArrayMeta meta, HeaderFromProto(h, "output"));
      outputs.emplace_back(meta.dtype, meta.shape);
    }
    ChunkSequencer sequencer = ChunkSequencer::ForTensors(outputs, "output");
    for (size_t i = 1; i < written.size(); ++i) {
      SHARD_RETURN_IF_ERROR(sequencer.Accept(written[i].chunk()));
    }
    SHARD_RETURN_IF_ERROR(sequencer.Finish());
    return outputs;
  }

  bool Holds(const std::string& name, uint64_t version,
             const std::vector<float>& want) {
    absl::StatusOr<ResidentStore::Block> b = store_->Find(name, version);
    return b.ok() && Values(*b->data) == want;
  }

  std::vector<float> ran() {
    absl::MutexLock lock(&mu_);
    return ran_;
  }

  FunctionRegistry registry_;
  ShardExecutor executor_{&registry_};
  FakeJobPeers peers_;
  ResidentStore memory_store_;
  ResidentStore* store_ = &memory_store_;
  JobSequencer sequencer_;
  MemoryBudget* budget_ = nullptr;
  std::atomic<int> runs_{0};
  absl::Mutex mu_;
  std::vector<float> ran_ ABSL_GUARDED_BY(mu_);
};

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

// Cancels a job that waits for its turn (before any kernel ran), and says
// that it did.
std::function<bool()> CancelIfWaiting(const std::atomic<int>& runs,
                                      std::atomic<bool>* waited) {
  return [&runs, waited] {
    if (runs > 0) return false;
    *waited = true;
    return true;
  };
}

TEST_F(ShardJobTest, ASkippedTicketLetsTheNextGo) {
  sequencer_.Skip("worker-a", 0);
  FakeShardStream stream;
  std::atomic<bool> waited{false};
  stream.set_on_cancelled_check(CancelIfWaiting(runs_, &waited));
  Send(stream, Header("job-b", 1, {5}), {5});
  EXPECT_TRUE(RunJob(stream).ok());
  EXPECT_FALSE(waited);
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

  FakeShardStream next;
  std::atomic<bool> waited{false};
  next.set_on_cancelled_check(CancelIfWaiting(runs_, &waited));
  Send(next, Header("job-b", 1, {7}), {7});
  EXPECT_TRUE(RunJob(next).ok());
  EXPECT_FALSE(waited) << "ticket 1 waited for the ticket of a failed receive";
  EXPECT_EQ(ran(), (std::vector<float>{7}));
}

TEST_F(ShardJobTest, AFailedJobHandsItsTurnOn) {
  FakeShardStream failing;
  Send(failing, Header("job-a", 0, {1}, "refuse"), {1});
  EXPECT_TRUE(StatusIs(RunJob(failing), absl::StatusCode::kFailedPrecondition,
                       {"refuse: not today"}));
  runs_ = 0;  // so a wait of the next job is seen (and cancelled) at once
  FakeShardStream next;
  std::atomic<bool> waited{false};
  next.set_on_cancelled_check(CancelIfWaiting(runs_, &waited));
  Send(next, Header("job-b", 1, {2}), {2});
  EXPECT_TRUE(RunJob(next).ok());
  EXPECT_FALSE(waited);
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

TEST_F(ShardJobTest, AFailedFunctionReturnsItsErrorAndStoresNothing) {
  FakeShardStream stream;
  SendStoringJob(stream, "refuse");
  Decide(stream, true);
  EXPECT_TRUE(StatusIs(RunJob(stream), absl::StatusCode::kFailedPrecondition,
                       {"refuse: not today"}));
  EXPECT_TRUE(stream.written().empty());
  ExpectNothingStored();
}

TEST_F(ShardJobTest, ACommitStoresTheWritesOnlyWhenDecided) {
  FakeShardStream stream;
  const std::vector<float> x = {3, 4};
  v1::ShardJob header = Header("job-a", 0, x);
  StoreOutput(&header, "r");
  Send(stream, header, x);
  absl::Status status;
  std::thread t([&] { status = RunJob(stream); });
  // The outputs went out; the writes wait for the decision.
  ASSERT_TRUE(WaitUntil([&] { return !stream.written().empty(); }));
  EXPECT_FALSE(Holds("r", 1, PlusOne(x)));
  Decide(stream, true);
  t.join();
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_TRUE(Holds("r", 1, PlusOne(x)));
  EXPECT_EQ(stream.written().at(0).outputs().digests_size(), 1);
}

TEST_F(ShardJobTest, AnAbortStoresNothing) {
  FakeShardStream stream;
  SendStoringJob(stream);
  Decide(stream, false);
  EXPECT_TRUE(RunJob(stream).ok());
  ExpectNothingStored();
}

TEST_F(ShardJobTest, AStreamEndingBeforeTheDecisionAborts) {
  FakeShardStream stream;
  SendStoringJob(stream);
  stream.Close();
  EXPECT_TRUE(RunJob(stream).ok());
  ExpectNothingStored();
}

TEST_F(ShardJobTest, ACancelWhileWaitingForTheDecisionAborts) {
  FakeShardStream stream;
  SendStoringJob(stream);
  absl::Status status;
  std::thread t([&] { status = RunJob(stream); });
  ASSERT_TRUE(WaitUntil([&] { return !stream.written().empty(); }));
  stream.Cancel();
  t.join();
  ExpectNothingStored();
}

TEST_F(ShardJobTest, ACancelBeforeTheOutputsGoOutSendsNothing) {
  FakeShardStream stream;
  SendStoringJob(stream);
  Decide(stream, true);
  // Cancelled once the function has run.
  stream.set_on_cancelled_check([this] { return runs_ > 0; });
  EXPECT_TRUE(StatusIs(RunJob(stream), absl::StatusCode::kCancelled,
                       {"job cancelled"}));
  EXPECT_TRUE(stream.written().empty());
  ExpectNothingStored();
}

TEST_F(ShardJobTest, ACoordinatorGoneWhileSendingEndsTheJob) {
  FakeShardStream stream;
  Send(stream, Header("job-a", 0, {3}), {3});
  stream.FailWritesFrom(1);  // the headers go, the chunk does not
  EXPECT_TRUE(StatusIs(RunJob(stream), absl::StatusCode::kCancelled,
                       {"coordinator went away"}));
  // A job that stores its output: its staged write is dropped.
  FakeShardStream storing;
  SendStoringJob(storing, "add_one", "job-b", 1);
  Decide(storing, true);
  storing.FailWritesFrom(0);
  EXPECT_TRUE(StatusIs(RunJob(storing), absl::StatusCode::kCancelled,
                       {"coordinator went away"}));
  ExpectNothingStored("job-b");
}

TEST_F(ShardJobTest, ACommitThatCannotBePersistedFailsTheJob) {
  TempDir tmp("shard_job_test");
  // "r"'s directory cannot be made: a file stands where it would go.
  fs::create_directories(fs::path(tmp.path()) / "arrays");
  std::ofstream(fs::path(tmp.path()) / "arrays" / "r") << "in the way";
  ResidentStore disk_store(tmp.path());
  store_ = &disk_store;
  FakeShardStream stream;
  SendStoringJob(stream);
  Decide(stream, true);
  const std::string dir = (fs::path(tmp.path()) / "arrays" / "r").string();
  EXPECT_TRUE(StatusIs(RunJob(stream), absl::StatusCode::kInternal,
                       {"device 0 cannot keep the job's writes",
                        "cannot create directory " + dir}));
  EXPECT_TRUE(disk_store.All().empty());
}

}  // namespace
}  // namespace shardmap
