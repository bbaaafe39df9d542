// Tests of server/output_streaming: which jobs may stream their outputs
// while the devices run, and StreamOutputs against devices that pour
// their blocks on another thread: the sink gets the result's headers,
// then the whole output in order, checked against a plain reassembly.
#include "server/output_streaming.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/string_view.h"
#include "wire/chunking.h"

namespace shardmap {
namespace {

// Keeps what StreamOutputs sends.
class RecordingSink : public ResultSink {
 public:
  bool Begin(const std::vector<JobOutput>& outputs) override {
    for (const JobOutput& o : outputs) metas.push_back(o.meta);
    return true;
  }
  bool Chunk(LentChunk&& chunk) override {
    if (chunk.index != 0 || chunk.offset != received ||
        chunk.size() > kChunkBytes || chunk.owner == nullptr) {
      out_of_order = true;
    }
    received += chunk.size();
    chunks.push_back(std::move(chunk));
    return true;
  }
  // The bytes of the chunks kept, in order.
  std::string bytes() const {
    std::string all;
    for (const LentChunk& c : chunks) {
      for (absl::string_view piece : c.pieces) {
        all.append(piece.data(), piece.size());
      }
    }
    return all;
  }
  std::vector<ArrayMeta> metas;
  std::vector<LentChunk> chunks;  // lent: each keeps its owner
  size_t received = 0;
  bool out_of_order = false;
};

JobPlan PlanOnX2(const char* out_spec) {
  JobPlan plan;
  plan.mesh = *Mesh::Create({{"x", 2}});
  plan.out_specs.push_back(*PartitionSpec::Parse(out_spec));
  return plan;
}

TEST(OutputStreamingTest, OnlyJobsThatChangeAndHoldNothingStream) {
  const JobPlan pure = PlanOnX2("P('x')");
  EXPECT_TRUE(MayStreamOutputs(pure, /*keyed=*/false));
  EXPECT_FALSE(MayStreamOutputs(pure, /*keyed=*/true));
  JobPlan reads = pure;
  reads.access.reads.insert("table");
  EXPECT_FALSE(MayStreamOutputs(reads, false));
  JobPlan writes = pure;
  writes.access.writes.insert("table");
  EXPECT_FALSE(MayStreamOutputs(writes, false));
  JobPlan donates = pure;
  donates.args.push_back(
      ArgPlan{ArrayMeta{DType::kFloat32, {2}}, PartitionSpec(),
              *BlockLayout::Create(pure.mesh, PartitionSpec(), Shape{2},
                                   "args[0]", "x"),
              std::nullopt,
              /*donated=*/true});
  EXPECT_FALSE(MayStreamOutputs(donates, false));
  // Each of these holds or changes a resident array even with its access
  // sets left empty (a hand-built plan): none streams.
  JobPlan resident_arg = donates;
  resident_arg.args[0].donated = false;
  resident_arg.args[0].resident = ResidentArray{};
  EXPECT_FALSE(MayStreamOutputs(resident_arg, false));
  JobPlan state = pure;
  state.states.push_back(StatePlan{});
  EXPECT_FALSE(MayStreamOutputs(state, false));
  JobPlan stores = pure;
  stores.resident_outputs = {"table"};
  EXPECT_FALSE(MayStreamOutputs(stores, false));
}

// Output [2, n] float32 under P('x') on x=2: device d's block is row d,
// holding 1000 * d + column. The devices pour their blocks in 64 KiB
// pieces, taking turns, on another thread while StreamOutputs runs here
// (how far they got when each chunk goes is up to the scheduler; that a
// chunk leaves before the devices are done is job_service_test's).
// The chunks are lent from the whole output, which outlives the buffers
// for as long as a chunk does.
TEST(OutputStreamingTest, StreamsTheWholeOutputInOrder) {
  const JobPlan plan = PlanOnX2("P('x')");
  const int64_t n = 3 * kChunkBytes / 8 + 5;  // 3 chunks and a bit in all
  auto owned = std::make_unique<OutputBuffers>(plan, uint64_t{1} << 30);
  OutputBuffers& buffers = *owned;
  const ArrayMeta block{DType::kFloat32, {1, n}};
  std::vector<std::vector<float>> blocks(2, std::vector<float>(n));
  std::vector<ChunkSequencer::Sink> sinks;
  for (int64_t d = 0; d < 2; ++d) {
    for (int64_t c = 0; c < n; ++c) blocks[d][c] = 1000.0f * d + c;
    sinks.push_back(buffers.SinkFor(0, d, block));
    ASSERT_NE(sinks.back(), nullptr);
    DeviceResult headers;
    headers.outputs = {block};
    headers.digests.outputs = {0};
    buffers.Announce(d, headers);
  }
  std::thread devices([&] {
    const size_t size = n * sizeof(float);
    for (size_t at = 0; at < size; at += 64 << 10) {
      for (int64_t d = 0; d < 2; ++d) {
        const char* b = reinterpret_cast<const char*>(blocks[d].data());
        sinks[d](at, absl::string_view(b + at,
                                       std::min<size_t>(64 << 10, size - at)));
      }
    }
    buffers.Finished(0);
    buffers.Finished(1);
  });
  RecordingSink sink;
  const std::vector<WorkerPool::Worker> workers(2);
  absl::StatusOr<std::optional<std::vector<JobOutput>>> streamed =
      StreamOutputs(plan, workers, buffers, sink, absl::InfiniteFuture(), {});
  devices.join();
  ASSERT_TRUE(streamed.ok()) << streamed.status();
  ASSERT_TRUE(streamed->has_value());
  ASSERT_EQ((*streamed)->size(), 1u);  // the outcome: headers, no data
  EXPECT_EQ((**streamed)[0].meta.shape, (Shape{2, n}));
  EXPECT_FALSE((**streamed)[0].data.has_value());
  ASSERT_FALSE(sink.chunks.empty());
  const std::weak_ptr<const void> whole = sink.chunks[0].owner;
  owned.reset();
  EXPECT_FALSE(whole.expired());  // the chunks keep it
  ASSERT_EQ(sink.metas.size(), 1u);
  EXPECT_EQ(sink.metas[0].shape, (Shape{2, n}));
  EXPECT_FALSE(sink.out_of_order);
  const std::string bytes = sink.bytes();
  ASSERT_EQ(bytes.size(), 2 * n * sizeof(float));
  std::vector<float> got(2 * n);
  std::memcpy(got.data(), bytes.data(), bytes.size());
  for (int64_t d = 0; d < 2; ++d) {
    for (int64_t c = 0; c < n; ++c) {
      ASSERT_EQ(got[d * n + c], blocks[d][c]) << "row " << d << " col " << c;
    }
  }
  sink.chunks.clear();
  EXPECT_TRUE(whole.expired());
}

// One chunk or less need not stream: nothing is sent, and the assembly
// answers once the devices are done.
TEST(OutputStreamingTest, ASmallOutputIsLeftToTheAssembly) {
  const JobPlan plan = PlanOnX2("P('x')");
  OutputBuffers buffers(plan, uint64_t{1} << 30);
  const ArrayMeta block{DType::kFloat32, {4}};
  for (int64_t d = 0; d < 2; ++d) {
    ASSERT_NE(buffers.SinkFor(0, d, block), nullptr);
    DeviceResult headers;
    headers.outputs = {block};
    headers.digests.outputs = {0};
    buffers.Announce(d, headers);
    buffers.Finished(d);
  }
  RecordingSink sink;
  const std::vector<WorkerPool::Worker> workers(2);
  absl::StatusOr<std::optional<std::vector<JobOutput>>> streamed =
      StreamOutputs(plan, workers, buffers, sink, absl::InfiniteFuture(), {});
  ASSERT_TRUE(streamed.ok()) << streamed.status();
  EXPECT_FALSE(streamed->has_value());
  EXPECT_TRUE(sink.metas.empty());
}

}  // namespace
}  // namespace shardmap
