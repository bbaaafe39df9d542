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
#include "tests/unit/fake_shard_channel.h"
#include "tests/unit/status_matchers.h"
#include "tests/unit/test_jobs.h"
#include "tests/unit/wait_until.h"
#include "wire/proto_convert.h"
#include "wire/signature.h"

namespace shardmap {
namespace {

// A bound on waits that must end; never reached when all is well.
constexpr absl::Duration kLong = absl::Seconds(10);

// The fake worker behaviours these tests use.
FakeWorkerScript Refuse() {  // unreachable: the header never goes out
  FakeWorkerScript s;
  s.fail_write = 0;
  s.finish = absl::UnavailableError("connection refused");
  return s;
}
FakeWorkerScript Stuck() {  // aborted before its header goes out
  FakeWorkerScript s;
  s.block_write = 0;
  return s;
}
FakeWorkerScript Record() {  // takes the header, then refuses the job
  FakeWorkerScript s;
  s.finish = absl::InvalidArgumentError("refused by the fake worker");
  return s;
}

// The tickets that reached `address` in job headers.
std::vector<uint64_t> Headers(const FakeWorkerConnector& c,
                              const std::string& address) {
  std::vector<uint64_t> out;
  for (const v1::ShardRequest& r : c.Sent(address)) {
    if (r.has_job()) out.push_back(r.job().ticket());
  }
  return out;
}

class JobTicketsTest : public ::testing::Test {
 protected:
  JobTicketsTest() { spdlog::set_level(spdlog::level::err); }

  absl::Status RunOnce(JobRunner& runner) {
    Tensor x = *Tensor::Create(DType::kFloat32, {8});
    std::vector<Tensor> inputs;
    inputs.push_back(std::move(x));
    return runner
        .Run("job", plan_, std::move(inputs), workers_,
             connector_.Now() + kLong)
        .status();
  }

  // Each device's call on a thread of its own: a stuck device's header
  // then waits on its thread while the others fail (a serial job's thread
  // would wait in the first stuck send until the deadline, and the fake
  // clock does not move).
  static JobRunner::Options Threaded() {
    JobRunner::Options options;
    options.job_links = JobLinks::kNever;
    return options;
  }

  JobPlan plan_ = IdentityPlan(4);
  std::vector<WorkerPool::Worker> workers_ = TestWorkers(4);
  FakeWorkerConnector connector_;
  // The skips each worker got, once `n` arrived in all.
  std::vector<std::vector<std::pair<std::string, uint64_t>>> SkipsOnce(
      size_t n) {
    auto total = [&] {
      size_t all = 0;
      for (const auto& w : workers_) all += connector_.Skips(w.address).size();
      return all;
    };
    EXPECT_TRUE(WaitUntil([&] { return total() == n; }, kLong));
    std::vector<std::vector<std::pair<std::string, uint64_t>>> out;
    for (const auto& w : workers_) out.push_back(connector_.Skips(w.address));
    return out;
  }
  // Device 0's worker refuses the connection; devices 1-3 are aborted
  // before their headers go out. Each worker is told to skip its ticket
  // 0, under the id its jobs carry.
  void ExpectSkipsForHeadersThatNeverWentOut(const JobRunner::Options& o) {
    connector_.Script(workers_[0].address, Refuse());
    for (int d : {1, 2, 3}) connector_.Script(workers_[d].address, Stuck());
    JobRunner runner(o, &connector_);
    EXPECT_TRUE(StatusIs(RunOnce(runner), absl::StatusCode::kUnavailable,
                         {"device 0", "connection refused"}));
    const auto skips = SkipsOnce(4);
    for (size_t d = 0; d < workers_.size(); ++d) {
      ASSERT_EQ(skips[d].size(), 1u) << d;
      EXPECT_EQ(skips[d][0].second, 0u);
      EXPECT_TRUE(absl::StartsWith(skips[d][0].first, workers_[d].id + "@"))
          << skips[d][0].first;
      EXPECT_TRUE(Headers(connector_, workers_[d].address).empty());
    }
  }
};

TEST_F(JobTicketsTest, DevicesWhoseHeadersNeverWentOutGetSkips) {
  ExpectSkipsForHeadersThatNeverWentOut(Threaded());
}

// The same serially, on links (the default for such a job): device 0's
// header fails first, so the others are opened aborted and never block.
TEST_F(JobTicketsTest, DevicesWhoseHeadersNeverWentOutGetSkipsSerially) {
  JobRunner::Options serial;
  serial.job_links = JobLinks::kAlways;
  ExpectSkipsForHeadersThatNeverWentOut(serial);
}

TEST_F(JobTicketsTest, LaterJobsCarryTheNextTicketsAndTheIncarnations) {
  // Worker 2 takes the header and refuses the job; the others are aborted
  // before their headers go out.
  for (int d : {0, 1, 3}) connector_.Script(workers_[d].address, Stuck());
  connector_.Script(workers_[2].address, Record());
  JobRunner runner(Threaded(), &connector_);
  EXPECT_FALSE(RunOnce(runner).ok());
  SkipsOnce(4);
  // The next job succeeds everywhere.
  for (int d = 0; d < 4; ++d) {
    FakeWorkerScript ok;
    ok.responses = FakeAnswer(plan_, d, Floats({0, 0}));
    connector_.Script(workers_[d].address, ok);
  }
  EXPECT_TRUE(RunOnce(runner).ok());
  // Worker 2 got both headers; the others only the second, ticket 1.
  EXPECT_EQ(Headers(connector_, workers_[2].address),
            (std::vector<uint64_t>{0, 1}));
  for (int d : {0, 1, 3}) {
    EXPECT_EQ(Headers(connector_, workers_[d].address),
              (std::vector<uint64_t>{1}));
  }
  // Every header names each device's worker process.
  const std::vector<v1::ShardRequest> sent =
      connector_.Sent(workers_[3].address);
  ASSERT_FALSE(sent.empty());
  const v1::ShardJob& last = sent.front().job();
  EXPECT_EQ(std::vector<uint64_t>(last.device_incarnations().begin(),
                                  last.device_incarnations().end()),
            (std::vector<uint64_t>{100, 101, 102, 103}));
}

TEST(TicketSkipperTest, SkipsToAGoneWorkerAreGivenUpAfterBoundedAttempts) {
  spdlog::set_level(spdlog::level::off);
  FakeWorkerConnector connector;
  FakeWorkerScript gone;
  gone.skip = absl::UnavailableError("gone");
  connector.Script("127.0.0.1:1", gone);
  TicketSkipper::Options options;
  options.attempts = 3;
  options.retry_pause = absl::Milliseconds(1);
  TicketSkipper skipper(&connector, options);
  skipper.Skip("127.0.0.1:1", "w0@1", 4);
  skipper.Skip("127.0.0.1:2", "w1@1", 7);
  ASSERT_TRUE(skipper.WaitIdle(kLong));
  // 3 attempts to the gone worker, 1 to the other.
  EXPECT_EQ(connector.SkipCalls("127.0.0.1:1"), 3);
  EXPECT_EQ(connector.SkipCalls("127.0.0.1:2"), 1);
  EXPECT_EQ(connector.Skips("127.0.0.1:2"),
            (std::vector<std::pair<std::string, uint64_t>>{{"w1@1", 7}}));
  EXPECT_TRUE(connector.Skips("127.0.0.1:1").empty());
}

TEST(TicketSkipperTest, AWorkersLaneIsRemovedOnceItsSkipsAreSent) {
  spdlog::set_level(spdlog::level::off);
  FakeWorkerConnector connector;
  FakeWorkerScript gone;
  gone.skip = absl::UnavailableError("gone");
  connector.Script("127.0.0.1:1", gone);
  TicketSkipper::Options options;
  options.attempts = 2;
  options.retry_pause = absl::Milliseconds(1);
  TicketSkipper skipper(&connector, options);
  // Workers come and go: each address gets skips once.
  for (int i = 1; i <= 20; ++i) {
    skipper.Skip(absl::StrCat("127.0.0.1:", i), absl::StrCat("w", i, "@1"), 0);
  }
  ASSERT_TRUE(skipper.WaitIdle(kLong));
  EXPECT_EQ(skipper.lanes(), 0u);
  for (int i = 2; i <= 20; ++i) {
    EXPECT_EQ(connector.Skips(absl::StrCat("127.0.0.1:", i)).size(), 1u) << i;
  }
  // An address that comes back gets a lane again.
  skipper.Skip("127.0.0.1:2", "w2@1", 1);
  ASSERT_TRUE(skipper.WaitIdle(kLong));
  EXPECT_EQ(skipper.lanes(), 0u);
  EXPECT_EQ(connector.Skips("127.0.0.1:2").size(), 2u);
}

}  // namespace
}  // namespace shardmap
