#include "server/call_registry.h"

#include <gtest/gtest.h>

#include <thread>

namespace shardmap {
namespace {

using Outcome = CallRegistry::Outcome;

absl::Time Soon() { return absl::Now() + absl::Seconds(5); }

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
  CallRegistry calls({});
  auto first = calls.Begin("k", 7, "job f", Soon());
  ASSERT_TRUE(first.ok());
  std::thread finisher([&] {
    absl::SleepFor(absl::Milliseconds(200));
    first->claim->Finish(Answer("late answer"));
  });
  const absl::Time start = absl::Now();
  auto repeat = calls.Begin("k", 7, "job f", Soon());
  finisher.join();
  ASSERT_TRUE(repeat.ok()) << repeat.status();
  ASSERT_NE(repeat->done, nullptr);
  EXPECT_EQ(repeat->done->response, "late answer");
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(150));
}

TEST(CallRegistryTest, ARepeatTakesOverWhenTheRunningCallFails) {
  CallRegistry calls({});
  auto first = calls.Begin("k", 7, "job f", Soon());
  ASSERT_TRUE(first.ok());
  std::thread failer([&] {
    absl::SleepFor(absl::Milliseconds(100));
    first->claim.reset();
  });
  auto repeat = calls.Begin("k", 7, "job f", Soon());
  failer.join();
  ASSERT_TRUE(repeat.ok()) << repeat.status();
  EXPECT_NE(repeat->claim, nullptr) << "the repeat must run the call itself";
}

TEST(CallRegistryTest, ARepeatGivesUpAtItsDeadline) {
  CallRegistry calls({});
  auto first = calls.Begin("k", 7, "job f", Soon());
  ASSERT_TRUE(first.ok());
  auto repeat =
      calls.Begin("k", 7, "job f", absl::Now() + absl::Milliseconds(100));
  ASSERT_EQ(repeat.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(repeat.status().message().find("still running"), std::string::npos)
      << repeat.status();
}

TEST(CallRegistryTest, OutcomesExpire) {
  CallRegistry::Options options;
  options.keep = absl::Milliseconds(50);
  CallRegistry calls(options);
  auto first = calls.Begin("k", 7, "job f", Soon());
  first->claim->Finish(Answer("a"));
  absl::SleepFor(absl::Milliseconds(100));
  auto later = calls.Begin("k", 7, "job f", Soon());
  ASSERT_TRUE(later.ok());
  EXPECT_NE(later->claim, nullptr) << "an expired key is a new call";
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
