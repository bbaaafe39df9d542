// Tests of server/output_buffers: device blocks written through their sinks
// land where the out_spec puts them (checked against a plain reassembly),
// and a block that does not fit the first, or an output over the byte
// limit, gets no sink.
#include "server/output_buffers.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <optional>
#include <vector>

#include "absl/strings/string_view.h"

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

}  // namespace
}  // namespace shardmap
