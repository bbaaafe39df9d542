// Tests of server/output_buffers: device blocks written through their sinks
// land where the out_spec puts them (checked against a plain reassembly),
// and a block that does not fit the first, or an output over the byte
// limit, gets no sink; how much of an output is in, while blocks arrive in
// any interleaving, against a plain map of the bytes written; and the
// waits end with a device's failure, from the watch or another thread.
#include "server/output_buffers.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/synchronization/notification.h"
#include "tests/unit/status_matchers.h"

namespace shardmap {
namespace {

// A job on mesh x=2, y=2 with one output under `out_spec`.
JobPlan PlanOn(const char* out_spec) {
  JobPlan plan;
  plan.mesh = *Mesh::Create({{"x", 2}, {"y", 2}});
  plan.out_specs.push_back(*PartitionSpec::Parse(out_spec));
  return plan;
}

// Writes `block` (float32 values) through `sink` in pieces of 3 bytes, as
// chunks cut at any byte would arrive.
void Pour(const ChunkSequencer::Sink& sink, const std::vector<float>& block) {
  const char* bytes = reinterpret_cast<const char*>(block.data());
  const size_t n = block.size() * sizeof(float);
  for (size_t at = 0; at < n; at += 3) {
    sink(at, absl::string_view(bytes + at, std::min<size_t>(3, n - at)));
  }
}

// Output [4, 6] float32 under P('x', 'y') on x=2, y=2: each device's
// [2, 3] block holds 100 * device + its index in the block; the whole
// output must hold it at rows 2 * x.., columns 3 * y...
TEST(OutputBuffersTest, EveryBlockLandsWhereItsSpecPutsIt) {
  const JobPlan plan = PlanOn("P('x', 'y')");
  OutputBuffers buffers(plan, 1 << 20);
  const ArrayMeta block{DType::kFloat32, {2, 3}};
  for (int64_t d = 0; d < 4; ++d) {
    ChunkSequencer::Sink sink = buffers.SinkFor(0, d, block);
    ASSERT_NE(sink, nullptr) << d;
    std::vector<float> values(6);
    std::iota(values.begin(), values.end(), 100.0f * d);
    Pour(sink, values);
  }
  std::optional<Tensor> whole = buffers.Take(0);
  ASSERT_TRUE(whole.has_value());
  ASSERT_EQ(whole->shape(), (Shape{4, 6}));
  const float* got = whole->data_as<float>();
  for (int64_t d = 0; d < 4; ++d) {
    const int64_t x = d / 2, y = d % 2;  // row-major device ids
    for (int r = 0; r < 2; ++r) {
      for (int c = 0; c < 3; ++c) {
        EXPECT_EQ(got[(2 * x + r) * 6 + 3 * y + c], 100.0f * d + 3 * r + c)
            << "device " << d << " row " << r << " column " << c;
      }
    }
  }
  EXPECT_FALSE(buffers.Take(0).has_value());  // taken once
}

TEST(OutputBuffersTest, ABlockUnlikeTheFirstGetsNoSink) {
  const JobPlan plan = PlanOn("P('x')");
  OutputBuffers buffers(plan, 1 << 20);
  EXPECT_NE(buffers.SinkFor(0, 0, ArrayMeta{DType::kFloat32, {2}}), nullptr);
  EXPECT_EQ(buffers.SinkFor(0, 2, ArrayMeta{DType::kFloat32, {3}}), nullptr);
  EXPECT_EQ(buffers.SinkFor(0, 2, ArrayMeta{DType::kInt32, {2}}), nullptr);
  std::optional<Tensor> whole = buffers.Take(0);
  ASSERT_TRUE(whole.has_value());
  EXPECT_EQ(whole->shape(), (Shape{4}));
}

// An output over the limit (with the outputs allocated before it), or a
// block whose rank the spec does not fit, is left to the assembly, which
// reports it.
TEST(OutputBuffersTest, AnOutputThatCannotBeMadeGetsNoSink) {
  const JobPlan plan = PlanOn("P('x', 'y')");
  OutputBuffers small(plan, 64);
  EXPECT_EQ(small.SinkFor(0, 0, ArrayMeta{DType::kFloat32, {3, 3}}), nullptr);
  EXPECT_FALSE(small.Take(0).has_value());
  // Whole outputs share one budget: the second no longer fits.
  JobPlan two = plan;
  two.out_specs.push_back(two.out_specs[0]);
  OutputBuffers shared(two, 200);
  EXPECT_NE(shared.SinkFor(0, 0, ArrayMeta{DType::kFloat32, {2, 2}}), nullptr);
  EXPECT_EQ(shared.SinkFor(1, 0, ArrayMeta{DType::kFloat32, {3, 3}}), nullptr);
  EXPECT_TRUE(shared.Take(0).has_value());
  EXPECT_FALSE(shared.Take(1).has_value());
  OutputBuffers rank(plan, 1 << 20);
  EXPECT_EQ(rank.SinkFor(0, 0, ArrayMeta{DType::kFloat32, {3}}), nullptr);
  EXPECT_EQ(rank.SinkFor(0, 1, ArrayMeta{DType::kFloat32, {3}}), nullptr);
}

// Announces device `d` with one block header per output.
void AnnounceBlocks(OutputBuffers& buffers, int64_t d,
                    const std::vector<ArrayMeta>& blocks) {
  DeviceResult headers;
  headers.outputs = blocks;
  buffers.Announce(d, headers);
}

// Announces every device of the x=2, y=2 mesh with `block`.
void AnnounceAll(OutputBuffers& buffers, const ArrayMeta& block) {
  for (int64_t d = 0; d < 4; ++d) AnnounceBlocks(buffers, d, {block});
}

// True if AwaitPlaced says bytes [0, end) of output `o` are in, without
// waiting.
bool In(OutputBuffers& buffers, size_t o, size_t end) {
  return buffers.AwaitPlaced(o, end, absl::InfinitePast(), {}).ok();
}

// Blocks of output [4, 6] float32 under `spec` on x=2, y=2 arrive a few
// bytes at a time, the devices in random turns; after every piece, the
// bytes said to be in are exactly the longest prefix of the whole output
// that the pieces written so far cover (a plain byte map, filled by
// copying each block's bytes to where they belong by hand).
TEST(OutputBuffersTest, WhatIsInIsThePrefixTheWrittenBytesCover) {
  for (const char* spec : {"P('x', 'y')", "P('y')", "P(None, 'x')"}) {
    SCOPED_TRACE(spec);
    const JobPlan plan = PlanOn(spec);
    OutputBuffers buffers(plan, 1 << 20);
    const PartitionSpec parsed = *PartitionSpec::Parse(spec);
    // Block shape and origin of device d, by hand.
    auto split = [&](int dim, int64_t d, int64_t size, int64_t* origin) {
      const std::vector<std::string> axes =
          dim < static_cast<int>(parsed.entries().size())
              ? parsed.entries()[dim]
              : std::vector<std::string>{};
      int64_t parts = 1, index = 0;
      for (const std::string& a : axes) {
        const int64_t coord = a == "x" ? d / 2 : d % 2;
        index = index * 2 + coord;
        parts *= 2;
      }
      *origin = index * (size / parts);
      return size / parts;
    };
    std::vector<int64_t> rows(4), cols(4), row0(4), col0(4);
    for (int64_t d = 0; d < 4; ++d) {
      rows[d] = split(0, d, 4, &row0[d]);
      cols[d] = split(1, d, 6, &col0[d]);
    }
    std::vector<ChunkSequencer::Sink> sinks(4);
    std::vector<size_t> sent(4, 0);
    std::vector<bool> covered(4 * 6 * sizeof(float), false);
    std::vector<int64_t> senders;
    for (int64_t d = 0; d < 4; ++d) {
      const ArrayMeta block{DType::kFloat32, {rows[d], cols[d]}};
      if (!plan.IsOutputRepresentative(0, d)) continue;
      sinks[d] = buffers.SinkFor(0, d, block);
      ASSERT_NE(sinks[d], nullptr);
      senders.push_back(d);
    }
    for (int64_t d = 0; d < 4; ++d) {
      AnnounceBlocks(buffers, d,
                     {ArrayMeta{DType::kFloat32, {rows[d], cols[d]}}});
    }
    absl::StatusOr<std::optional<std::vector<const DeviceResult*>>> streamable =
        buffers.AwaitStreamable(0, absl::InfinitePast(), {});
    ASSERT_TRUE(streamable.ok() && streamable->has_value());
    std::mt19937 rng(11);
    const std::vector<float> zeros(24, 0.0f);
    for (;;) {
      std::vector<int64_t> open;
      for (int64_t d : senders) {
        if (sent[d] < static_cast<size_t>(rows[d] * cols[d] * 4)) {
          open.push_back(d);
        }
      }
      if (open.empty()) break;
      const int64_t d = open[rng() % open.size()];
      const size_t total = rows[d] * cols[d] * 4;
      const size_t n = std::min<size_t>(1 + rng() % 7, total - sent[d]);
      sinks[d](sent[d], absl::string_view(
                            reinterpret_cast<const char*>(zeros.data()), n));
      for (size_t b = sent[d]; b < sent[d] + n; ++b) {
        const size_t element = b / 4;
        const int64_t r = row0[d] + element / cols[d];
        const int64_t c = col0[d] + element % cols[d];
        covered[(r * 6 + c) * 4 + b % 4] = true;
      }
      sent[d] += n;
      const size_t prefix =
          std::find(covered.begin(), covered.end(), false) - covered.begin();
      ASSERT_TRUE(In(buffers, 0, prefix)) << prefix;
      if (prefix < covered.size()) {
        ASSERT_FALSE(In(buffers, 0, prefix + 1)) << prefix;
      }
    }
    EXPECT_TRUE(In(buffers, 0, covered.size()));
  }
}

TEST(OutputBuffersTest, AnOutputWithABlockLeftOutCannotStream) {
  const JobPlan plan = PlanOn("P('x')");
  OutputBuffers buffers(plan, 1 << 20);
  ASSERT_NE(buffers.SinkFor(0, 0, ArrayMeta{DType::kFloat32, {2}}), nullptr);
  ASSERT_EQ(buffers.SinkFor(0, 2, ArrayMeta{DType::kFloat32, {3}}), nullptr);
  AnnounceAll(buffers, ArrayMeta{DType::kFloat32, {2}});
  absl::StatusOr<std::optional<std::vector<const DeviceResult*>>> headers =
      buffers.AwaitStreamable(0, absl::InfiniteFuture(), {});
  ASSERT_TRUE(headers.ok());
  EXPECT_FALSE(headers->has_value());
}

// Outputs of at most `min_bytes` need not stream: the wait goes on until
// every device finished (the watch, run while it waits, finishes them
// here), so a small job's thread wakes once, not at the announcement and
// again at the end.
TEST(OutputBuffersTest, SmallOutputsWaitForTheDevicesToFinish) {
  const JobPlan plan = PlanOn("P('x')");
  OutputBuffers buffers(plan, 1 << 20);
  for (int64_t d : {0, 2}) {
    ASSERT_NE(buffers.SinkFor(0, d, ArrayMeta{DType::kFloat32, {2}}), nullptr);
  }
  AnnounceAll(buffers, ArrayMeta{DType::kFloat32, {2}});
  // 16 bytes are more than 15: they stream at once.
  absl::StatusOr<std::optional<std::vector<const DeviceResult*>>> big =
      buffers.AwaitStreamable(15, absl::InfiniteFuture(), {});
  ASSERT_TRUE(big.ok());
  ASSERT_TRUE(big->has_value());
  EXPECT_EQ((*big)->size(), 4u);
  EXPECT_EQ((**big)[3]->outputs[0].shape, (Shape{2}));
  int watched = 0;
  OutputBuffers::Watch finish_all{absl::Milliseconds(1), [&] {
                                    ++watched;
                                    for (int64_t d = 0; d < 4; ++d) {
                                      buffers.Finished(d);
                                    }
                                  }};
  absl::StatusOr<std::optional<std::vector<const DeviceResult*>>> small =
      buffers.AwaitStreamable(16, absl::InfiniteFuture(), finish_all);
  ASSERT_TRUE(small.ok());
  EXPECT_FALSE(small->has_value());
  EXPECT_EQ(watched, 1);
}

TEST(OutputBuffersTest, TheWaitsEndAtTheDeadlineSayingHowFarTheyGot) {
  const JobPlan plan = PlanOn("P('x')");
  OutputBuffers buffers(plan, 1 << 20);
  AnnounceBlocks(buffers, 0, {ArrayMeta{DType::kFloat32, {2}}});
  EXPECT_TRUE(StatusIs(
      buffers.AwaitStreamable(0, absl::InfinitePast(), {}).status(),
      absl::StatusCode::kDeadlineExceeded, {"1 of the job's 4 devices"}));
  ChunkSequencer::Sink sink =
      buffers.SinkFor(0, 0, ArrayMeta{DType::kFloat32, {2}});
  ASSERT_NE(buffers.SinkFor(0, 2, ArrayMeta{DType::kFloat32, {2}}), nullptr);
  const float one = 1.0f;
  sink(0, absl::string_view(reinterpret_cast<const char*>(&one), 4));
  EXPECT_TRUE(StatusIs(buffers.AwaitPlaced(0, 8, absl::InfinitePast(), {}),
                       absl::StatusCode::kDeadlineExceeded,
                       {"output 0: 4 of its 16 bytes"}));
}

// A wait runs the watch while it waits, and the watch (as the fan-out's
// does when it finds a worker lost) or another thread can end it.
TEST(OutputBuffersTest, AStopEndsTheWaitsFromTheWatchOrAnotherThread) {
  const JobPlan plan = PlanOn("P('x')");
  OutputBuffers buffers(plan, 1 << 20);
  int watched = 0;
  OutputBuffers::Watch watch{absl::Milliseconds(1), [&] {
                               ++watched;
                               buffers.Stop(absl::UnavailableError("lost"));
                             }};
  EXPECT_TRUE(StatusIs(
      buffers.AwaitStreamable(0, absl::InfiniteFuture(), watch).status(),
      absl::StatusCode::kUnavailable, {"lost"}));
  EXPECT_EQ(watched, 1);

  // The stopper waits until the waiter is waiting (its watch ran once).
  OutputBuffers other(plan, 1 << 20);
  ASSERT_NE(other.SinkFor(0, 0, ArrayMeta{DType::kFloat32, {1}}), nullptr);
  absl::Notification waiting;
  std::thread stopper([&] {
    waiting.WaitForNotification();
    other.Stop(absl::CancelledError("another device failed"));
  });
  OutputBuffers::Watch signal{absl::Milliseconds(1), [&] {
                                if (!waiting.HasBeenNotified()) {
                                  waiting.Notify();
                                }
                              }};
  EXPECT_TRUE(StatusIs(other.AwaitPlaced(0, 4, absl::InfiniteFuture(), signal),
                       absl::StatusCode::kCancelled, {"another device"}));
  stopper.join();
  // The first error stays.
  other.Stop(absl::InternalError("later"));
  EXPECT_TRUE(StatusIs(other.AwaitPlaced(0, 4, absl::InfiniteFuture(), {}),
                       absl::StatusCode::kCancelled, {"another device"}));
}

}  // namespace
}  // namespace shardmap
