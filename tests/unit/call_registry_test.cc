// Tests of server/call_registry: a repeated call_id gets the first call's
// outcome, waits for it while it runs (ordered by the registry's on_wait
// hook, not by sleeps), and outcomes expire by an injected clock.
#include "server/call_registry.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "tests/unit/fake_clock.h"

namespace shardmap {
namespace {

using Outcome = CallRegistry::Outcome;

// A deadline no passing test reaches, however busy the machine.
absl::Time Soon() { return absl::Now() + absl::Minutes(1); }

// A repeat of a call, run on its own thread: records when the registry
// makes it wait (through Options::on_wait) and what its Begin returned.
class Repeat {
 public:
  ~Repeat() {
    if (thread_.joinable()) thread_.join();
  }
  // Options whose on_wait reports to this.
  CallRegistry::Options Hook() {
    CallRegistry::Options options;
    options.on_wait = [this](const std::string&) {
      absl::MutexLock lock(&mu_);
      ++waits_;
    };
    return options;
  }
  void Start(CallRegistry* calls, absl::Time deadline) {
    thread_ = std::thread([this, calls, deadline] {
      auto r = calls->Begin("k", 7, "job f", deadline);
      absl::MutexLock lock(&mu_);
      result_ = std::move(r);
      returned_ = true;
    });
  }
  // Blocks until the repeat waits or returns (bounded); true if it is
  // waiting for the first call, i.e. has not returned.
  bool AwaitWaiting() {
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(this, &Repeat::WaitingOrReturned),
                         absl::Minutes(1));
    return waits_ > 0 && !returned_;
  }
  // Joins the thread: what Begin returned.
  absl::StatusOr<CallRegistry::Begun> Result() {
    thread_.join();
    absl::MutexLock lock(&mu_);
    return std::move(result_);
  }
  int waits() {
    absl::MutexLock lock(&mu_);
    return waits_;
  }

 private:
  bool WaitingOrReturned() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return waits_ > 0 || returned_;
  }

  absl::Mutex mu_;
  int waits_ ABSL_GUARDED_BY(mu_) = 0;
  bool returned_ ABSL_GUARDED_BY(mu_) = false;
  absl::StatusOr<CallRegistry::Begun> result_ ABSL_GUARDED_BY(mu_) =
      absl::UnknownError("not returned");
  std::thread thread_;
};

std::shared_ptr<Outcome> Answer(const std::string& response,
                                std::vector<int64_t> output_bytes = {}) {
  auto o = std::make_shared<Outcome>();
  o->job_id = "job-1";
  o->response = response;
  for (int64_t n : output_bytes) {
    o->outputs.push_back(
        std::make_shared<const Tensor>(DType::kInt32, Shape{n / 4}));
  }
  return o;
}

TEST(CallRegistryTest, TheFirstCallRunsAndARepeatGetsItsOutcome) {
  CallRegistry calls({});
  auto first = calls.Begin("k", 7, "job f", Soon());
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_NE(first->claim, nullptr);
  EXPECT_EQ(first->done, nullptr);
  first->claim->Finish(Answer("first answer", {12}));

  auto again = calls.Begin("k", 7, "job f", Soon());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->claim, nullptr);
  ASSERT_NE(again->done, nullptr);
  EXPECT_EQ(again->done->response, "first answer");
  ASSERT_EQ(again->done->outputs.size(), 1u);
  EXPECT_EQ(again->done->outputs[0]->num_bytes(), 12u);
  EXPECT_TRUE(again->done->outputs_kept);
}

TEST(CallRegistryTest, AKeyUsedForAnotherRequestIsInvalidArgument) {
  CallRegistry calls({});
  auto first = calls.Begin("k", 7, "job f", Soon());
  ASSERT_TRUE(first.ok());
  first->claim->Finish(Answer("a"));
  auto other = calls.Begin("k", 8, "job g", Soon());
  ASSERT_EQ(other.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(other.status().message().find("call_id 'k'"), std::string::npos)
      << other.status();
  EXPECT_NE(other.status().message().find("job f"), std::string::npos)
      << other.status();
}

TEST(CallRegistryTest, AFailedCallReleasesItsKeySoARetryRunsAnew) {
  CallRegistry calls({});
  {
    auto first = calls.Begin("k", 7, "job f", Soon());
    ASSERT_TRUE(first.ok());
    ASSERT_NE(first->claim, nullptr);
  }  // the claim dies unfinished: the call failed
  EXPECT_EQ(calls.size(), 0u);
  auto retry = calls.Begin("k", 7, "job f", Soon());
  ASSERT_TRUE(retry.ok());
  EXPECT_NE(retry->claim, nullptr);
}

TEST(CallRegistryTest, ARepeatWaitsForTheRunningCall) {
  Repeat repeat;
  CallRegistry calls(repeat.Hook());
  auto first = calls.Begin("k", 7, "job f", Soon());
  ASSERT_TRUE(first.ok());
  repeat.Start(&calls, Soon());
  // The first call finishes only once the repeat is blocked on it.
  const bool waiting = repeat.AwaitWaiting();
  first->claim->Finish(Answer("late answer"));
  auto got = repeat.Result();
  ASSERT_TRUE(waiting) << "the repeat did not wait for the running call";
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->claim, nullptr) << "the call must not run twice";
  ASSERT_NE(got->done, nullptr);
  EXPECT_EQ(got->done->response, "late answer");
}

TEST(CallRegistryTest, ARepeatTakesOverWhenTheRunningCallFails) {
  Repeat repeat;
  CallRegistry calls(repeat.Hook());
  auto first = calls.Begin("k", 7, "job f", Soon());
  ASSERT_TRUE(first.ok());
  repeat.Start(&calls, Soon());
  const bool waiting = repeat.AwaitWaiting();
  first->claim.reset();  // the first call fails while the repeat waits
  auto got = repeat.Result();
  ASSERT_TRUE(waiting) << "the repeat did not wait for the running call";
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_NE(got->claim, nullptr) << "the repeat must run the call itself";
  EXPECT_EQ(got->done, nullptr);
}

TEST(CallRegistryTest, ARepeatGivesUpAtItsDeadline) {
  Repeat repeat;
  CallRegistry calls(repeat.Hook());
  auto first = calls.Begin("k", 7, "job f", Soon());
  ASSERT_TRUE(first.ok());
  // Nothing finishes the first call: the repeat's own deadline ends it.
  auto got = calls.Begin("k", 7, "job f", absl::Now() + absl::Milliseconds(50));
  ASSERT_EQ(got.status().code(), absl::StatusCode::kDeadlineExceeded)
      << got.status();
  EXPECT_NE(got.status().message().find("still running"), std::string::npos)
      << got.status();
  EXPECT_GE(repeat.waits(), 1) << "the repeat gave up without waiting";
  // The first call still holds the key and may still finish.
  first->claim->Finish(Answer("a"));
  auto after = calls.Begin("k", 7, "job f", Soon());
  ASSERT_TRUE(after.ok()) << after.status();
  ASSERT_NE(after->done, nullptr);
  EXPECT_EQ(after->done->response, "a");
}

TEST(CallRegistryTest, OutcomesExpireAfterKeep) {
  FakeClock clock;
  CallRegistry::Options options;
  options.keep = absl::Minutes(10);
  options.clock = [&clock] { return clock.Now(); };
  CallRegistry calls(options);
  auto first = calls.Begin("k", 7, "job f", Soon());
  ASSERT_TRUE(first.ok());
  first->claim->Finish(Answer("a"));
  clock.Advance(absl::Minutes(10) - absl::Nanoseconds(1));
  auto kept = calls.Begin("k", 7, "job f", Soon());
  ASSERT_TRUE(kept.ok()) << kept.status();
  ASSERT_NE(kept->done, nullptr) << "the outcome is kept for `keep`";
  EXPECT_EQ(kept->done->response, "a");
  clock.Advance(absl::Nanoseconds(1));
  auto later = calls.Begin("k", 7, "job f", Soon());
  ASSERT_TRUE(later.ok()) << later.status();
  EXPECT_NE(later->claim, nullptr) << "an expired key is a new call";
  EXPECT_EQ(later->done, nullptr);
}

TEST(CallRegistryTest, TheOldestGoBeyondTheCount) {
  CallRegistry::Options options;
  options.max_calls = 2;
  CallRegistry calls(options);
  for (const char* key : {"a", "b", "c"}) {
    auto b = calls.Begin(key, 1, "job f", Soon());
    ASSERT_TRUE(b.ok());
    b->claim->Finish(Answer(key));
  }
  EXPECT_EQ(calls.size(), 2u);
  auto a = calls.Begin("a", 1, "job f", Soon());
  EXPECT_NE(a->claim, nullptr);
  auto c = calls.Begin("c", 1, "job f", Soon());
  ASSERT_NE(c->done, nullptr);
  EXPECT_EQ(c->done->response, "c");
}

TEST(CallRegistryTest, OutputsOverTheBudgetAreDroppedOldestFirst) {
  CallRegistry::Options options;
  options.max_output_bytes = 100;
  CallRegistry calls(options);
  auto finish = [&](const std::string& key, int64_t bytes) {
    auto b = calls.Begin(key, 1, "job f", Soon());
    ASSERT_TRUE(b.ok());
    b->claim->Finish(Answer(key, {bytes}));
  };
  finish("old", 60);
  finish("new", 60);  // 120 > 100: old's outputs go
  auto old_one = calls.Begin("old", 1, "job f", Soon());
  ASSERT_NE(old_one->done, nullptr);
  EXPECT_FALSE(old_one->done->outputs_kept);
  EXPECT_TRUE(old_one->done->outputs.empty());
  EXPECT_EQ(old_one->done->response, "old") << "the answer itself stays";
  auto new_one = calls.Begin("new", 1, "job f", Soon());
  EXPECT_TRUE(new_one->done->outputs_kept);
  finish("huge", 1000);  // alone over the budget: never kept
  auto huge = calls.Begin("huge", 1, "job f", Soon());
  EXPECT_FALSE(huge->done->outputs_kept);
}

}  // namespace
}  // namespace shardmap
