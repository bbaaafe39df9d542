// Test helpers for worker/shard_job: a fake RunShard stream, fake peers
// (no collectives, nothing remote), and a fixture that runs jobs of two
// kernels registered here (add_one, refuse) against the real JobSequencer
// and ResidentStore.
//
// The job order is observed without timing: a job waiting its turn asks
// the stream whether it was cancelled (JobSequencer::Enter polls it), and a
// job that runs asks only after its kernel ran; so a cancelled() call
// before any kernel ran is a job waiting.
#ifndef SHARDMAP_TESTS_UNIT_SHARD_JOB_FIXTURE_H_
#define SHARDMAP_TESTS_UNIT_SHARD_JOB_FIXTURE_H_

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <algorithm>
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
#include "worker/shard_job.h"

namespace shardmap {

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
  // Holds every chunk lent to it (and so its owner) until ReleaseLent, as
  // gRPC may hold a sent chunk's bytes after the call has ended.
  void KeepLent() { keep_lent_ = true; }
  void ReleaseLent() {
    absl::MutexLock lock(&mu_);
    lent_.clear();
  }

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
  bool WriteChunk(const LentChunk& chunk, bool last) override {
    if (keep_lent_) {
      absl::MutexLock lock(&mu_);
      lent_.push_back(chunk);
    }
    return WriteChunkCopy<v1::ShardResponse>(this, chunk, last);
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
  bool keep_lent_ = false;
  std::vector<LentChunk> lent_ ABSL_GUARDED_BY(mu_);
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

inline Tensor Floats(const std::vector<float>& values) {
  Tensor t(DType::kFloat32, {static_cast<int64_t>(values.size())});
  for (size_t i = 0; i < values.size(); ++i) t.data_as<float>()[i] = values[i];
  return t;
}

inline std::vector<float> Values(const Tensor& t) {
  const float* p = t.data_as<float>();
  return std::vector<float>(p, p + t.num_elements());
}

// x + 1, element by element: the reference the kernel is checked against.
inline std::vector<float> PlusOne(std::vector<float> x) {
  for (float& v : x) v += 1;
  return x;
}

class ShardJobTest : public ::testing::Test {
 protected:
  ShardJobTest() {
    spdlog::set_level(spdlog::level::off);
    // add_one(x) = x + 1; it logs x[0], so a test sees which jobs ran and
    // in what order.
    // Functions are registered as the SDK declares them (as a plugin's).
    const absl::Status add_one = registry_.Register(
        shardmap::sdk::Function("add_one", 1)
            .Kernel([this](shardmap::sdk::Context& ctx, const auto& args) {
              return AddOne(ctx, args[0]);
            }));
    const absl::Status refuse = registry_.Register(
        shardmap::sdk::Function("refuse", 1)
            .Kernel(
                [this](shardmap::sdk::Context&, const auto&)
                    -> absl::StatusOr<std::vector<shardmap::sdk::TensorView>> {
                  ++runs_;
                  return absl::FailedPreconditionError("refuse: not today");
                }));
    EXPECT_TRUE(add_one.ok() && refuse.ok()) << add_one << refuse;
  }

  // add_one(x) = x + 1 on float32 x; it logs x[0], so a test sees which
  // jobs ran and in what order.
  absl::StatusOr<std::vector<shardmap::sdk::TensorView>> AddOne(
      shardmap::sdk::Context& ctx, const shardmap::sdk::TensorView& in) {
    const float* v = in.data_as<float>();
    std::vector<float> x(v, v + in.num_elements());
    {
      absl::MutexLock lock(&mu_);
      ran_.push_back(x.empty() ? -1 : x[0]);
    }
    ++runs_;
    absl::StatusOr<shardmap::sdk::TensorView> out =
        ctx.Allocate(shardmap::sdk::DType::kFloat32, in.shape());
    if (!out.ok()) return out.status();
    const std::vector<float> y = PlusOne(x);
    std::copy(y.begin(), y.end(), out->data_as<float>());
    return std::vector<shardmap::sdk::TensorView>{*out};
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

  // Runs job-b, ticket 1, over {x}, cancelling it at once if it waits for
  // its turn: true if it ran without waiting.
  bool NextRunsWithoutWaiting(float x);

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

// Cancels a job that waits for its turn (before any kernel ran), and says
// that it did.
inline std::function<bool()> CancelIfWaiting(const std::atomic<int>& runs,
                                             std::atomic<bool>* waited) {
  return [&runs, waited] {
    if (runs > 0) return false;
    *waited = true;
    return true;
  };
}

inline bool ShardJobTest::NextRunsWithoutWaiting(float x) {
  runs_ = 0;
  FakeShardStream next;
  std::atomic<bool> waited{false};
  next.set_on_cancelled_check(CancelIfWaiting(runs_, &waited));
  Send(next, Header("job-b", 1, {x}), {x});
  const absl::Status s = RunJob(next);
  EXPECT_TRUE(s.ok()) << s;
  return s.ok() && !waited;
}

}  // namespace shardmap

#endif  // SHARDMAP_TESTS_UNIT_SHARD_JOB_FIXTURE_H_
