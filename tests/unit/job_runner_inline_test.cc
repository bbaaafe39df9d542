// Tests of small jobs' one-message requests and answers between the
// coordinator and its workers (wire/chunking.h kInlineChunkBytes): a worker
// that registered inline_chunks gets a small job's argument chunks inside
// its ShardJob, one that did not gets chunk messages, and the outputs a
// worker sends inside ShardOutputs are assembled as chunk messages are.
// Fake workers (tests/unit/fake_shard_channel.h); the reference is the
// job's input, which identity returns.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/unit/job_runner_fixture.h"
#include "tests/unit/status_matchers.h"
#include "wire/chunking.h"

namespace shardmap {
namespace {

using JobRunnerInlineTest = JobRunnerFixture;

// Device d's bytes of `input` when it is split P('x') over `devices`.
std::string BlockBytes(const Tensor& input, int devices, int d) {
  const size_t n = input.num_bytes() / devices;
  return std::string(reinterpret_cast<const char*>(input.data()) + d * n, n);
}

// The answer FakeAnswer gives, with its chunk messages moved inside the
// ShardOutputs, as a worker does when asked (ShardJob.inline_outputs).
std::vector<v1::ShardResponse> InlineAnswer(const JobPlan& plan, int d,
                                            const Tensor& block) {
  std::vector<v1::ShardResponse> separate = FakeAnswer(plan, d, block);
  std::vector<v1::ShardResponse> one = {separate[0]};
  for (size_t i = 1; i < separate.size(); ++i) {
    *one[0].mutable_outputs()->add_chunks() = separate[i].chunk();
  }
  return one;
}

TEST_F(JobRunnerInlineTest, AWorkerThatTakesThemGetsTheArgumentsInItsHeader) {
  const JobPlan plan = IdentityPlan(4, "P('x')");
  // Workers 0 and 1 registered inline_chunks; 2 and 3 predate it.
  workers_[0].inline_chunks = true;
  workers_[1].inline_chunks = true;
  AnswerAll(plan, 4);
  JobRunner runner(JobRunner::Options{}, &connector_);
  auto out = Run(runner, plan, 4);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(FloatValues(*(*out)[0].data), FloatValues(Input(4)));
  for (int d = 0; d < 4; ++d) {
    const std::vector<v1::ShardRequest> sent =
        connector_.Sent(workers_[d].address);
    ASSERT_FALSE(sent.empty());
    const v1::ShardJob& job = sent[0].job();
    // Every worker may answer in one message; one that predates it ignores
    // the field.
    EXPECT_TRUE(job.inline_outputs());
    const std::string want = BlockBytes(Input(4), 4, d);
    if (d < 2) {
      ASSERT_EQ(sent.size(), 1u) << "device " << d;
      ASSERT_EQ(job.chunks_size(), 1);
      EXPECT_EQ(job.chunks(0).index(), 0u);
      EXPECT_EQ(job.chunks(0).offset(), 0u);
      EXPECT_EQ(job.chunks(0).data(), want);
    } else {
      ASSERT_EQ(sent.size(), 2u) << "device " << d;
      EXPECT_EQ(job.chunks_size(), 0);
      EXPECT_EQ(sent[1].chunk().data(), want);
    }
  }
}

TEST_F(JobRunnerInlineTest, ATwoPhaseJobsHeaderCarriesItsArgumentsToo) {
  // A job that stores its output: each stream stays open after the
  // header for the commit decision.
  workers_.resize(2);
  const JobPlan plan = IdentityPlan(2, "P('x')", "A", &index_);
  for (int d = 0; d < 2; ++d) workers_[d].inline_chunks = true;
  AnswerAll(plan, 2);
  JobRunner runner(JobRunner::Options{}, &connector_, &index_);
  auto out = Run(runner, plan, 2);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].stored_as, "A");
  for (int d = 0; d < 2; ++d) {
    const std::vector<v1::ShardRequest> sent =
        connector_.Sent(workers_[d].address);
    // The header with the block inside, then the decision.
    ASSERT_EQ(sent.size(), 2u) << "device " << d;
    EXPECT_TRUE(sent[0].job().two_phase());
    ASSERT_EQ(sent[0].job().chunks_size(), 1);
    EXPECT_EQ(sent[0].job().chunks(0).data(), BlockBytes(Input(2), 2, d));
    EXPECT_TRUE(sent[1].has_decision());
    EXPECT_EQ(connector_.Decisions(workers_[d].address),
              std::vector<bool>{true});
  }
}

TEST_F(JobRunnerInlineTest, ArgumentsOverTheLimitGoAsChunkMessages) {
  // Each device's block is one float more than fits inline.
  const int64_t per_device = kInlineChunkBytes / sizeof(float) + 1;
  const JobPlan plan = IdentityPlan(2, "P('x')", "", nullptr, per_device);
  std::vector<float> x(2 * per_device);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.5f * i - 7;
  const Tensor input = Floats(x);
  for (int d = 0; d < 2; ++d) {
    workers_[d].inline_chunks = true;
    const std::string bytes = BlockBytes(input, 2, d);
    Tensor block = *Tensor::Create(DType::kFloat32, {per_device});
    std::copy(bytes.begin(), bytes.end(),
              reinterpret_cast<char*>(block.data()));
    FakeWorkerScript s;
    s.responses = FakeAnswer(plan, d, block);
    connector_.Script(workers_[d].address, s);
  }
  workers_.resize(2);
  JobRunner runner(JobRunner::Options{}, &connector_);
  std::vector<Tensor> inputs;
  inputs.push_back(Floats(x));
  auto out = runner.Run("job-8", plan, std::move(inputs), workers_,
                        connector_.Now() + absl::Seconds(10));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(FloatValues(*(*out)[0].data), x);
  for (int d = 0; d < 2; ++d) {
    const std::vector<v1::ShardRequest> sent =
        connector_.Sent(workers_[d].address);
    ASSERT_EQ(sent.size(), 2u) << "device " << d;
    EXPECT_EQ(sent[0].job().chunks_size(), 0);
    EXPECT_EQ(sent[1].chunk().data(), BlockBytes(input, 2, d));
  }
}

TEST_F(JobRunnerInlineTest, OutputsInsideShardOutputsAreAssembled) {
  const JobPlan plan = IdentityPlan(4, "P('x')");
  for (int d = 0; d < 4; ++d) {
    FakeWorkerScript s;
    // Devices 0 and 2 answer in one message, 1 and 3 as before.
    s.responses = d % 2 == 0 ? InlineAnswer(plan, d, Block(d))
                             : FakeAnswer(plan, d, Block(d));
    connector_.Script(workers_[d].address, s);
  }
  JobRunner runner(JobRunner::Options{}, &connector_);
  auto out = Run(runner, plan, 4);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(FloatValues(*(*out)[0].data), FloatValues(Input(4)));
}

TEST_F(JobRunnerInlineTest, ABadInlineOutputChunkFailsTheJobNamingIt) {
  const JobPlan plan = IdentityPlan(4, "P('x')");
  AnswerAll(plan, 4);
  FakeWorkerScript bad;
  bad.responses = InlineAnswer(plan, 1, Block(1));
  // One byte past the end of the device's block.
  bad.responses[0]
      .mutable_outputs()
      ->mutable_chunks(0)
      ->mutable_data()
      ->push_back('\0');
  connector_.Script(workers_[1].address, bad);
  JobRunner runner(JobRunner::Options{}, &connector_);
  auto out = Run(runner, plan, 4);
  EXPECT_TRUE(StatusIs(out.status(), absl::StatusCode::kInvalidArgument,
                       {"output 0", "device 1"}))
      << out.status();
}

}  // namespace
}  // namespace shardmap
