// ChunkedReduce and ReduceFrom against plain ReduceInto: the operand cut
// into chunks at arbitrary byte boundaries (elements split between chunks,
// empty chunks), or the first operand read from elsewhere, must give
// exactly the bytes of one ReduceInto over the whole operand.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "worker/collectives/reduce.h"

namespace shardmap {
namespace {

std::vector<uint8_t> RandomElements(DType dtype, size_t count,
                                    std::mt19937* rng) {
  std::vector<uint8_t> bytes(count * ItemSize(dtype));
  std::uniform_int_distribution<int> small(-1000, 1000);
  for (size_t i = 0; i < count; ++i) {
    uint8_t* at = bytes.data() + i * ItemSize(dtype);
    const int v = small(*rng);
    switch (dtype) {
      case DType::kFloat32: {
        const float f = static_cast<float>(v) / 7.0f;
        std::memcpy(at, &f, sizeof(f));
        break;
      }
      case DType::kFloat64: {
        const double d = static_cast<double>(v) / 7.0;
        std::memcpy(at, &d, sizeof(d));
        break;
      }
      case DType::kInt32: {
        const int32_t x = v * 1000003;
        std::memcpy(at, &x, sizeof(x));
        break;
      }
      case DType::kInt64: {
        const int64_t x = int64_t{v} << 40;
        std::memcpy(at, &x, sizeof(x));
        break;
      }
    }
  }
  return bytes;
}

TEST(ChunkedReduceTest, AnyChunkingEqualsOneReduceInto) {
  std::mt19937 rng(7);
  for (DType dtype : kAllDTypes) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin}) {
      for (size_t count : {size_t{1}, size_t{3}, size_t{257}}) {
        const std::vector<uint8_t> acc = RandomElements(dtype, count, &rng);
        const std::vector<uint8_t> in = RandomElements(dtype, count, &rng);
        std::vector<uint8_t> expected = acc;
        ReduceInto(dtype, op, absl::MakeSpan(expected), in);
        for (int trial = 0; trial < 20; ++trial) {
          std::vector<uint8_t> got = acc;
          ChunkedReduce reduce(dtype, op, absl::MakeSpan(got));
          size_t at = 0;
          while (at < in.size()) {
            // Chunks of 0 to 13 bytes: elements of 4 and 8 bytes straddle
            // them in every possible way.
            const size_t n = std::min<size_t>(
                std::uniform_int_distribution<size_t>(0, 13)(rng),
                in.size() - at);
            reduce.Add(absl::MakeConstSpan(in).subspan(at, n));
            at += n;
            EXPECT_LE(reduce.done(), at);
            EXPECT_EQ(reduce.done() % ItemSize(dtype), 0u);
          }
          EXPECT_EQ(reduce.done(), in.size());
          EXPECT_EQ(got, expected)
              << DTypeName(dtype) << " " << ReduceOpName(op) << " count "
              << count << " trial " << trial;
        }
      }
    }
  }
}

TEST(ChunkedReduceTest, ASeparateFirstOperandGivesTheSameBytes) {
  std::mt19937 rng(5);
  for (DType dtype : kAllDTypes) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin}) {
      const std::vector<uint8_t> first = RandomElements(dtype, 101, &rng);
      const std::vector<uint8_t> in = RandomElements(dtype, 101, &rng);
      std::vector<uint8_t> expected = first;
      ReduceInto(dtype, op, absl::MakeSpan(expected), in);
      // ReduceFrom whole, into a buffer that starts as garbage.
      std::vector<uint8_t> whole(first.size(), 0xab);
      ReduceFrom(dtype, op, absl::MakeSpan(whole), first, in);
      EXPECT_EQ(whole, expected) << DTypeName(dtype) << ReduceOpName(op);
      // And in chunks of 5 bytes.
      std::vector<uint8_t> got(first.size(), 0xab);
      ChunkedReduce reduce(dtype, op, absl::MakeSpan(got), first);
      for (size_t at = 0; at < in.size(); at += 5) {
        reduce.Add(absl::MakeConstSpan(in).subspan(at, 5));
      }
      EXPECT_EQ(got, expected) << DTypeName(dtype) << ReduceOpName(op);
    }
  }
}

TEST(ChunkedReduceTest, OneWholeChunkIsReduceInto) {
  std::mt19937 rng(11);
  const std::vector<uint8_t> acc = RandomElements(DType::kFloat32, 1000, &rng);
  const std::vector<uint8_t> in = RandomElements(DType::kFloat32, 1000, &rng);
  std::vector<uint8_t> expected = acc;
  ReduceInto(DType::kFloat32, ReduceOp::kSum, absl::MakeSpan(expected), in);
  std::vector<uint8_t> got = acc;
  ChunkedReduce reduce(DType::kFloat32, ReduceOp::kSum, absl::MakeSpan(got));
  reduce.Add(in);
  EXPECT_EQ(got, expected);
}

}  // namespace
}  // namespace shardmap
