// Tests of server/arriving_inputs: a waiter is let go as soon as the prefix
// it needs is in, learns the client's error, or gives up at its deadline;
// arrays given whole never wait.
#include "server/arriving_inputs.h"

#include <gtest/gtest.h>

#include <numeric>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "tests/unit/fake_job_stream.h"
#include "tests/unit/status_matchers.h"
#include "wire/chunking.h"
#include "wire/proto_convert.h"

namespace shardmap {
namespace {

constexpr absl::Duration kLong = absl::Seconds(20);

// Two float32 arguments, unsplit: a of `a_elements`, b of one element.
JobPlan TwoArguments(size_t a_elements) {
  const Mesh mesh = *Mesh::Create({{"x", 1}});
  JobPlan plan;
  for (int64_t n : {static_cast<int64_t>(a_elements), int64_t{1}}) {
    absl::StatusOr<BlockLayout> layout =
        BlockLayout::Create(mesh, PartitionSpec(), {n}, "in_specs[0]", "P()");
    EXPECT_TRUE(layout.ok()) << layout.status();
    plan.args.push_back(ArgPlan{ArrayMeta{DType::kFloat32, {n}},
                                PartitionSpec(), *std::move(layout),
                                std::nullopt, /*donated=*/false});
  }
  return plan;
}

Tensor Iota(size_t n, float from) {
  Tensor t(DType::kFloat32, {static_cast<int64_t>(n)});
  std::iota(t.data_as<float>(), t.data_as<float>() + n, from);
  return t;
}

// A client's upload of a (three chunks, 0, 1, 2, ...) and b (-7), whose
// JobSpec the service has read already.
struct Upload {
  static constexpr size_t kElements = 3 * kChunkBytes / sizeof(float);
  const Tensor a = Iota(kElements, 0);
  const Tensor b = Iota(1, -7);
  FakeJobStream stream{v1::JobSpec(), {&a, &b}};
  Upload() {
    v1::RunJobRequest spec;
    stream.Read(&spec);
  }
};

TEST(ArrivingInputsTest, WholeArraysNeverWait) {
  std::vector<Tensor> arrays;
  arrays.push_back(Iota(4, 0));
  ArrivingInputs inputs(std::move(arrays));
  EXPECT_TRUE(inputs.Await(0, 16, absl::InfinitePast()).ok());
  EXPECT_EQ(inputs.arrays()[0].data_as<float>()[3], 3.0f);
}

// A waiter for the first chunk's bytes is let go while the client still
// holds back its later chunks; then every byte is where it belongs.
TEST(ArrivingInputsTest, AWaiterGoesOnceItsPrefixIsIn) {
  Upload upload;
  const size_t n = Upload::kElements;
  FakeJobStream& stream = upload.stream;
  auto inputs = ArrivingInputs::ForPlan(TwoArguments(n));
  ASSERT_TRUE(inputs.ok()) << inputs.status();
  absl::Notification first_served;
  bool held = false;
  stream.BeforeRead([&](size_t i) {
    // Message 2 (a's second chunk) waits until the waiter for a's first
    // chunk has gone.
    if (i == 2) held = first_served.WaitForNotificationWithTimeout(kLong);
    return true;
  });
  absl::Status first;
  std::thread waiter([&] {
    first = (*inputs)->Await(0, kChunkBytes, absl::Now() + kLong);
    first_served.Notify();
  });
  const absl::Status received = (*inputs)->Receive(&stream, nullptr);
  waiter.join();
  ASSERT_TRUE(received.ok()) << received;
  EXPECT_TRUE(first.ok()) << first;
  EXPECT_TRUE(held);
  EXPECT_TRUE((*inputs)->Await(1, 4, absl::InfinitePast()).ok());
  const float* got = (*inputs)->arrays()[0].data_as<float>();
  for (size_t i = 0; i < n; i += 1021)
    ASSERT_EQ(got[i], static_cast<float>(i)) << i;
  EXPECT_EQ((*inputs)->arrays()[1].data_as<float>()[0], -7.0f);
}

// The client's error ends the waits for bytes that never came: one that
// runs while the bad chunk is read (or, if its thread starts late, begins
// just after) and one begun well after.
TEST(ArrivingInputsTest, TheClientsErrorEndsEveryWait) {
  Upload upload;
  const size_t n = Upload::kElements;
  FakeJobStream& stream = upload.stream;
  stream.requests()[2].mutable_chunk()->set_offset(5);  // a hole
  auto inputs = ArrivingInputs::ForPlan(TwoArguments(n));
  ASSERT_TRUE(inputs.ok());
  absl::Status waited;
  std::thread waiter(
      [&] { waited = (*inputs)->Await(1, 4, absl::Now() + kLong); });
  const absl::Status received = (*inputs)->Receive(&stream, nullptr);
  waiter.join();
  EXPECT_TRUE(StatusIs(received, absl::StatusCode::kInvalidArgument,
                       {"chunk out of order", "offset 5"}));
  EXPECT_EQ(waited, received);
  // What did arrive may still be read; what did not reports the error.
  EXPECT_TRUE((*inputs)->Await(0, kChunkBytes, absl::InfinitePast()).ok());
  EXPECT_EQ((*inputs)->Await(0, kChunkBytes + 1, absl::InfinitePast()),
            received);
}

TEST(ArrivingInputsTest, AWaitGivesUpAtItsDeadlineSayingWhatCame) {
  auto inputs = ArrivingInputs::ForPlan(TwoArguments(8));
  ASSERT_TRUE(inputs.ok());
  EXPECT_TRUE(StatusIs((*inputs)->Await(0, 4, absl::Now()),
                       absl::StatusCode::kDeadlineExceeded,
                       {"argument 0: 0 of its 32 bytes had arrived"}));
}

// The data hash of a call with a call_id covers every chunk: it is the
// fold of ChunkHash over exactly the chunks the client sent, in order.
TEST(ArrivingInputsTest, HashesTheChunksItReceives) {
  const Tensor b = Iota(1, 0);
  uint64_t hashes[2] = {0, 0};
  for (int k = 0; k < 2; ++k) {
    Tensor a2 = Iota(8, 0);
    a2.data_as<float>()[7] += static_cast<float>(k);
    FakeJobStream stream(v1::JobSpec(), {&a2, &b});
    uint64_t expected = 0;
    for (size_t i = 1; i < stream.requests().size(); ++i) {
      expected = ChunkHash(expected, stream.requests()[i].chunk());
    }
    v1::RunJobRequest spec;
    ASSERT_TRUE(stream.Read(&spec));
    auto inputs = ArrivingInputs::ForPlan(TwoArguments(8));
    ASSERT_TRUE(inputs.ok());
    ASSERT_TRUE((*inputs)->Receive(&stream, &hashes[k]).ok());
    EXPECT_EQ(hashes[k], expected) << k;
  }
  EXPECT_NE(hashes[0], hashes[1]);
}

// The hash is over a chunk's bytes however they arrived: in one string, or
// in the pieces of the received message (a retry may arrive cut otherwise).
TEST(ArrivingInputsTest, AChunksHashIgnoresHowItIsCut) {
  v1::ArrayChunk whole;
  whole.set_index(1);
  whole.set_offset(64);
  whole.set_data("some argument bytes");
  const absl::string_view data = whole.data();
  ReceivedChunk pieces;
  pieces.index = 1;
  pieces.offset = 64;
  pieces.pieces = {data.substr(0, 4), data.substr(4, 1), data.substr(5)};
  EXPECT_EQ(ChunkHash(9, whole), ChunkHash(9, pieces));
  pieces.offset = 65;
  EXPECT_NE(ChunkHash(9, whole), ChunkHash(9, pieces));
}

// A client that goes away midway is CANCELLED, not a malformed upload.
TEST(ArrivingInputsTest, AClientThatWentAwayIsCancelled) {
  Upload upload;
  const size_t n = Upload::kElements;
  FakeJobStream& stream = upload.stream;
  stream.BeforeRead([&](size_t i) {
    if (i < 2) return true;
    stream.Cancel();
    return false;
  });
  auto inputs = ArrivingInputs::ForPlan(TwoArguments(n));
  ASSERT_TRUE(inputs.ok());
  const absl::Status received = (*inputs)->Receive(&stream, nullptr);
  EXPECT_TRUE(StatusIs(received, absl::StatusCode::kCancelled,
                       {"the client went away while sending its arguments",
                        "argument 0 has 1048576 of its 3145728 bytes"}));
  EXPECT_EQ((*inputs)->Await(1, 4, absl::InfinitePast()), received);
  // What came before the client left may still be read: the devices that
  // already hold it are stopped by the job, not by this.
  EXPECT_TRUE((*inputs)->Await(0, 1048576, absl::InfinitePast()).ok());
  EXPECT_EQ((*inputs)->Await(0, 1048577, absl::InfinitePast()), received);
}

// Stop (another device failed) ends the waits for what has not come (what
// has come may still be read: AClientThatWentAwayIsCancelled).
TEST(ArrivingInputsTest, StopEndsTheWaitsForWhatHasNotCome) {
  auto inputs = ArrivingInputs::ForPlan(TwoArguments(8));
  ASSERT_TRUE(inputs.ok());
  absl::Status waited;
  std::thread waiter(
      [&] { waited = (*inputs)->Await(0, 32, absl::Now() + kLong); });
  (*inputs)->Stop(absl::CancelledError("another device of the job failed"));
  waiter.join();
  EXPECT_TRUE(StatusIs(waited, absl::StatusCode::kCancelled,
                       {"another device of the job failed"}));
  // And the waits that come later.
  EXPECT_TRUE(StatusIs((*inputs)->Await(1, 1, absl::Now() + kLong),
                       absl::StatusCode::kCancelled,
                       {"another device of the job failed"}));
}

}  // namespace
}  // namespace shardmap
