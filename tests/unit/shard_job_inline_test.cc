// Tests of a worker's one-message requests and answers for small jobs
// (wire/chunking.h kInlineChunkBytes): argument chunks inside the ShardJob
// are taken as chunk messages are, and with ShardJob.inline_outputs small
// outputs go inside ShardOutputs, larger ones as chunk messages. Over a
// fake stream (tests/unit/shard_job_fixture.h); the reference is a plain
// loop (PlusOne).
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "tests/unit/shard_job_fixture.h"
#include "tests/unit/status_matchers.h"

namespace shardmap {
namespace {

// The header of add_one over `x` with x's chunks inside it.
v1::ShardRequest InlineRequest(v1::ShardJob header,
                               const std::vector<float>& x) {
  AppendTensorChunks(0, Floats(x), header.mutable_chunks());
  v1::ShardRequest request;
  *request.mutable_job() = std::move(header);
  return request;
}

// The values of output 0 carried inside the first message's ShardOutputs.
std::vector<float> InlineValues(const v1::ShardResponse& response) {
  std::string bytes;
  for (const v1::ArrayChunk& c : response.outputs().chunks()) {
    EXPECT_EQ(c.index(), 0u);
    EXPECT_EQ(c.offset(), bytes.size());
    bytes += c.data();
  }
  std::vector<float> v(bytes.size() / sizeof(float));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
  return v;
}

class ShardJobInlineTest : public ShardJobTest {
 protected:
  // The stream carried ShardOutputs without chunks, then x + 1 as one
  // chunk message.
  static void ExpectChunkMessages(const FakeShardStream& stream,
                                  const std::vector<float>& x) {
    const std::vector<v1::ShardResponse> written = stream.written();
    ASSERT_EQ(written.size(), 2u);
    EXPECT_EQ(written[0].outputs().chunks_size(), 0);
    absl::StatusOr<std::vector<Tensor>> outputs = Outputs(stream);
    ASSERT_TRUE(outputs.ok()) << outputs.status();
    EXPECT_EQ(Values((*outputs)[0]), PlusOne(x));
  }
};

TEST_F(ShardJobInlineTest, ArgumentsInTheHeaderAndOutputsInOneMessage) {
  // A few values, and exactly kInlineChunkBytes of them.
  std::vector<float> at_limit(kInlineChunkBytes / sizeof(float));
  for (size_t i = 0; i < at_limit.size(); ++i) at_limit[i] = 0.5f * i - 9;
  const std::vector<std::vector<float>> inputs = {{1.5f, -2, 3, 40}, at_limit};
  for (uint64_t ticket = 0; ticket < inputs.size(); ++ticket) {
    const std::vector<float>& x = inputs[ticket];
    FakeShardStream stream;
    v1::ShardJob header = Header(absl::StrCat("job-", ticket), ticket, x);
    header.set_inline_outputs(true);
    stream.Push(InlineRequest(header, x));
    stream.Close();  // nothing follows the header
    ASSERT_TRUE(RunJob(stream).ok()) << x.size() << " values";
    const std::vector<v1::ShardResponse> written = stream.written();
    ASSERT_EQ(written.size(), 1u) << x.size() << " values";
    EXPECT_EQ(InlineValues(written[0]), PlusOne(x));
  }
}

TEST_F(ShardJobInlineTest, WithoutInlineOutputsTheChunksAreMessages) {
  FakeShardStream stream;
  const std::vector<float> x = {7, 8};
  stream.Push(InlineRequest(Header("job-1", 0, x), x));
  ASSERT_TRUE(RunJob(stream).ok());
  ExpectChunkMessages(stream, x);
}

TEST_F(ShardJobInlineTest, OutputsOverTheInlineLimitGoAsChunkMessages) {
  FakeShardStream stream;
  std::vector<float> x(kInlineChunkBytes / sizeof(float) + 1);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.25f * i;
  v1::ShardJob header = Header("job-1", 0, x);
  header.set_inline_outputs(true);
  Send(stream, header, x);
  ASSERT_TRUE(RunJob(stream).ok());
  ExpectChunkMessages(stream, x);
}

TEST_F(ShardJobInlineTest, ABadChunkInTheHeaderNamesTheArgument) {
  FakeShardStream stream;
  v1::ShardRequest request = InlineRequest(Header("job-a", 0, {1, 2}), {1, 2});
  request.mutable_job()->mutable_chunks(0)->set_index(3);
  stream.Push(request);
  EXPECT_TRUE(StatusIs(RunJob(stream), absl::StatusCode::kInvalidArgument,
                       {"argument 3"}));
  EXPECT_EQ(runs_, 0);
}

}  // namespace
}  // namespace shardmap
