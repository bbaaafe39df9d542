// Tests of the job runner's ticket delivery: every ticket the coordinator
// issues reaches its worker, as a job header or, for a device whose header
// never went out (its stream failed to open, or the job was aborted first),
// as a SkipTickets call; a skip to a worker that is gone is given up after
// a bounded number of attempts. Fakes stand in for the workers.
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "server/job_runner.h"
#include "server/planner.h"
#include "server/ticket_skipper.h"
#include "tests/unit/status_matchers.h"
#include "wire/proto_convert.h"
#include "wire/signature.h"

namespace shardmap {
namespace {

// A bound on waits that must end; never reached when all is well.
constexpr absl::Duration kLong = absl::Seconds(10);

// What the fake workers saw, by address.
struct Seen {
  absl::Mutex mu;
  // Tickets that arrived in a job header.
  std::map<std::string, std::vector<uint64_t>> headers ABSL_GUARDED_BY(mu);
  // The device incarnations of the last header.
  std::vector<uint64_t> incarnations ABSL_GUARDED_BY(mu);
  // Tickets that arrived as skips, with the worker id they were for.
  std::map<std::string, std::vector<std::pair<std::string, uint64_t>>> skips
      ABSL_GUARDED_BY(mu);
  int skip_calls ABSL_GUARDED_BY(mu) = 0;
};

// A stream that fails at its first write: the worker is unreachable.
class RefusedChannel final : public ShardChannel {
 public:
  bool Write(const v1::ShardRequest&) override { return false; }
  bool WritesDone() override { return false; }
  bool Read(v1::ShardResponse*) override { return false; }
  absl::Status Finish() override {
    return absl::UnavailableError("connection refused");
  }
  void Cancel() override {}
};

// A stream whose first write waits until the stream is cancelled, and then
// fails: a device whose header never goes out because the job was aborted
// first.
class StuckChannel final : public ShardChannel {
 public:
  bool Write(const v1::ShardRequest&) override {
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(&cancelled_), kLong);
    return false;
  }
  bool WritesDone() override { return false; }
  bool Read(v1::ShardResponse*) override { return false; }
  absl::Status Finish() override {
    return absl::CancelledError("the call was cancelled");
  }
  void Cancel() override {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
  }

 private:
  absl::Mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

// A stream that records the header's ticket, then fails as if the worker
// refused the job.
class RecordingChannel final : public ShardChannel {
 public:
  RecordingChannel(Seen* seen, std::string address)
      : seen_(seen), address_(std::move(address)) {}
  bool Write(const v1::ShardRequest& r) override {
    if (r.has_job()) {
      absl::MutexLock lock(&seen_->mu);
      seen_->headers[address_].push_back(r.job().ticket());
      seen_->incarnations.assign(r.job().device_incarnations().begin(),
                                 r.job().device_incarnations().end());
    }
    return true;
  }
  bool WritesDone() override { return true; }
  bool Read(v1::ShardResponse*) override { return false; }
  absl::Status Finish() override {
    return absl::InvalidArgumentError("refused by the fake worker");
  }
  void Cancel() override {}

 private:
  Seen* const seen_;
  const std::string address_;
};

class FakeConnector final : public WorkerConnector {
 public:
  // Per address: "refuse", "stuck" or "record".
  std::map<std::string, std::string> behaviour;
  // Addresses whose SkipTickets calls fail (the worker is gone).
  std::map<std::string, bool> gone;
  Seen seen;

  std::unique_ptr<ShardChannel> Open(const std::string& address,
                                     absl::Time) override {
    const std::string& b = behaviour.at(address);
    if (b == "refuse") return std::make_unique<RefusedChannel>();
    if (b == "stuck") return std::make_unique<StuckChannel>();
    return std::make_unique<RecordingChannel>(&seen, address);
  }
  absl::Status SkipTickets(const std::string& address,
                           const v1::SkipTicketsRequest& request,
                           absl::Time) override {
    absl::MutexLock lock(&seen.mu);
    ++seen.skip_calls;
    if (gone.count(address) > 0) return absl::UnavailableError("gone");
    for (uint64_t t : request.tickets()) {
      seen.skips[address].emplace_back(request.worker_id(), t);
    }
    return absl::OkStatus();
  }
};

JobPlan IdentityPlan(int devices) {
  v1::JobSpec spec;
  spec.set_function("identity");
  *spec.mutable_mesh() =
      MeshToProto(*Mesh::Create({{"x", static_cast<int64_t>(devices)}}));
  *spec.add_args() = HeaderToProto(DType::kFloat32, {devices * 2});
  *spec.add_in_specs() = SpecToProto(*PartitionSpec::Parse("P('x')"));
  *spec.add_out_specs() = SpecToProto(*PartitionSpec::Parse("P('x')"));
  auto plan = PlanJob(spec, [](const std::string&) {
    return absl::StatusOr<v1::FunctionSignature>(
        Signature("identity", 1).proto());
  });
  EXPECT_TRUE(plan.ok()) << plan.status();
  return *plan;
}

std::vector<WorkerPool::Worker> Workers(int n) {
  std::vector<WorkerPool::Worker> workers;
  for (int i = 0; i < n; ++i) {
    WorkerPool::Worker w;
    w.id = absl::StrCat("w", i);
    w.address = absl::StrCat("127.0.0.1:", 5000 + i);
    w.incarnation = 100 + i;
    workers.push_back(w);
  }
  return workers;
}

// Waits until `pred` holds (checked under seen.mu), at most kLong.
bool WaitFor(Seen& seen, const std::function<bool()>& pred) {
  absl::MutexLock lock(&seen.mu);
  auto cond = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(seen.mu) { return pred(); };
  return seen.mu.AwaitWithTimeout(absl::Condition(&cond), kLong);
}

class JobTicketsTest : public ::testing::Test {
 protected:
  JobTicketsTest() { spdlog::set_level(spdlog::level::err); }

  absl::Status RunOnce(JobRunner& runner) {
    Tensor x = *Tensor::Create(DType::kFloat32, {8});
    std::vector<Tensor> inputs;
    inputs.push_back(std::move(x));
    return runner
        .Run("job", plan_, std::move(inputs), workers_, absl::Now() + kLong)
        .status();
  }

  JobPlan plan_ = IdentityPlan(4);
  std::vector<WorkerPool::Worker> workers_ = Workers(4);
  FakeConnector connector_;
};

TEST_F(JobTicketsTest, DevicesWhoseHeadersNeverWentOutGetSkips) {
  // Device 0's worker refuses the connection; devices 1-3 are aborted
  // before their headers go out.
  connector_.behaviour = {{workers_[0].address, "refuse"},
                          {workers_[1].address, "stuck"},
                          {workers_[2].address, "stuck"},
                          {workers_[3].address, "stuck"}};
  JobRunner runner(JobRunner::Options{}, &connector_);
  EXPECT_TRUE(StatusIs(RunOnce(runner), absl::StatusCode::kUnavailable,
                       {"device 0", "connection refused"}));
  // Each worker is told to skip its ticket 0, under the id its jobs carry.
  ASSERT_TRUE(WaitFor(connector_.seen, [&] {
    connector_.seen.mu.AssertHeld();
    return connector_.seen.skips.size() == 4;
  }));
  absl::MutexLock lock(&connector_.seen.mu);
  for (const WorkerPool::Worker& w : workers_) {
    const auto& skips = connector_.seen.skips[w.address];
    ASSERT_EQ(skips.size(), 1u) << w.address;
    EXPECT_EQ(skips[0].second, 0u);
    EXPECT_TRUE(absl::StartsWith(skips[0].first, w.id + "@")) << skips[0].first;
  }
  EXPECT_TRUE(connector_.seen.headers.empty());
}

TEST_F(JobTicketsTest, LaterJobsCarryTheNextTicketsAndTheIncarnations) {
  connector_.behaviour = {{workers_[0].address, "refuse"},
                          {workers_[1].address, "stuck"},
                          {workers_[2].address, "record"},
                          {workers_[3].address, "stuck"}};
  JobRunner runner(JobRunner::Options{}, &connector_);
  EXPECT_FALSE(RunOnce(runner).ok());
  for (const WorkerPool::Worker& w : workers_) {
    connector_.behaviour[w.address] = "record";
  }
  EXPECT_FALSE(RunOnce(runner).ok());  // the fake workers refuse it
  ASSERT_TRUE(WaitFor(connector_.seen, [&] {
    connector_.seen.mu.AssertHeld();
    int skips = 0;
    for (const auto& [a, s] : connector_.seen.skips) skips += s.size();
    return skips == 4 + 4;
  }));
  absl::MutexLock lock(&connector_.seen.mu);
  // Worker 2 got both headers; the others only the second, ticket 1.
  EXPECT_EQ(connector_.seen.headers[workers_[2].address],
            (std::vector<uint64_t>{0, 1}));
  EXPECT_EQ(connector_.seen.headers[workers_[0].address],
            (std::vector<uint64_t>{1}));
  // Every header names each device's worker process.
  EXPECT_EQ(connector_.seen.incarnations,
            (std::vector<uint64_t>{100, 101, 102, 103}));
}

TEST(TicketSkipperTest, SkipsToAGoneWorkerAreGivenUpAfterBoundedAttempts) {
  spdlog::set_level(spdlog::level::off);
  FakeConnector connector;
  connector.gone["127.0.0.1:1"] = true;
  TicketSkipper::Options options;
  options.attempts = 3;
  options.retry_pause = absl::Milliseconds(1);
  TicketSkipper skipper(&connector, options);
  skipper.Skip("127.0.0.1:1", "w0@1", 4);
  skipper.Skip("127.0.0.1:2", "w1@1", 7);
  ASSERT_TRUE(skipper.WaitIdle(kLong));
  absl::MutexLock lock(&connector.seen.mu);
  // 3 attempts to the gone worker, 1 to the other.
  EXPECT_EQ(connector.seen.skip_calls, 4);
  EXPECT_EQ(connector.seen.skips["127.0.0.1:2"],
            (std::vector<std::pair<std::string, uint64_t>>{{"w1@1", 7}}));
  EXPECT_EQ(connector.seen.skips.count("127.0.0.1:1"), 0u);
}

}  // namespace
}  // namespace shardmap
