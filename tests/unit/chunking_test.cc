// Tests of wire/chunking: cutting arrays into ArrayChunk messages and the
// receiving side's ordering checks and reassembly.
#include "wire/chunking.h"

#include <gtest/gtest.h>

#include <cstring>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "tests/unit/status_matchers.h"

namespace shardmap {
namespace {

constexpr size_t kMiB = 1 << 20;

// 2.5 MiB of float32 with a byte pattern that differs from chunk to chunk.
Tensor BigTensor() {
  Tensor t(DType::kFloat32, {5, 128, 1024});  // 655360 floats
  for (size_t i = 0; i < t.num_bytes(); ++i) {
    t.data()[i] = static_cast<uint8_t>((i * 131 + i / 4093) & 0xFF);
  }
  return t;
}

std::vector<v1::ArrayChunk> Collect(uint32_t index, const Tensor& t) {
  std::vector<v1::ArrayChunk> chunks;
  EXPECT_TRUE(SendTensorChunks(index, t, [&](v1::ArrayChunk&& c) {
    chunks.push_back(std::move(c));
    return true;
  }));
  return chunks;
}

v1::ArrayChunk Chunk(uint32_t index, uint64_t offset, std::string data) {
  v1::ArrayChunk c;
  c.set_index(index);
  c.set_offset(offset);
  c.set_data(std::move(data));
  return c;
}

TEST(ChunkingTest, ChunkSizeIsOneMiB) {
  EXPECT_EQ(kChunkBytes, kMiB);
  EXPECT_LT(kChunkBytes + 4096, static_cast<size_t>(kMaxMessageBytes));
}

TEST(ChunkingTest, SendTensorChunksCutsInOrder) {
  const Tensor t = BigTensor();
  ASSERT_EQ(t.num_bytes(), 5 * kMiB / 2);
  const std::vector<v1::ArrayChunk> chunks = Collect(3, t);
  ASSERT_EQ(chunks.size(), 3u);
  const size_t want_sizes[3] = {kMiB, kMiB, kMiB / 2};
  size_t offset = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(chunks[i].index(), 3u);
    EXPECT_EQ(chunks[i].offset(), offset);
    ASSERT_EQ(chunks[i].data().size(), want_sizes[i]);
    EXPECT_LE(chunks[i].data().size(), kChunkBytes);
    EXPECT_EQ(
        std::memcmp(chunks[i].data().data(), t.data() + offset, want_sizes[i]),
        0);
    offset += chunks[i].data().size();
  }
  EXPECT_EQ(offset, t.num_bytes());
}

TEST(ChunkingTest, SendBytesChunksCopiesTheBytesInOrder) {
  std::vector<uint8_t> bytes(2 * kChunkBytes + 12345);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = (i * 131) % 251;
  std::string back;
  int chunks = 0;
  ASSERT_TRUE(
      SendBytesChunks(3, bytes.data(), bytes.size(), [&](v1::ArrayChunk&& c) {
        EXPECT_EQ(c.index(), 3u);
        EXPECT_EQ(c.offset(), back.size());
        EXPECT_LE(c.data().size(), kChunkBytes);
        back += c.data();
        ++chunks;
        return true;
      }));
  EXPECT_EQ(chunks, 3);
  EXPECT_EQ(back, std::string(bytes.begin(), bytes.end()));
}

// Lent chunks point into the caller's bytes, each holding the owner.
TEST(ChunkingTest, LendBytesChunksReferToTheBytesAndHoldTheOwner) {
  auto bytes = std::make_shared<std::vector<uint8_t>>(kChunkBytes + 10);
  std::vector<LentChunk> chunks;
  ASSERT_TRUE(LendBytesChunks(5, bytes->data(), bytes->size(), bytes,
                              [&](LentChunk&& c) {
                                chunks.push_back(std::move(c));
                                return true;
                              }));
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[0].index, 5u);
  EXPECT_EQ(chunks[0].offset, 0u);
  ASSERT_EQ(chunks[0].pieces.size(), 1u);
  EXPECT_EQ(chunks[0].pieces[0].data(),
            reinterpret_cast<const char*>(bytes->data()));
  EXPECT_EQ(chunks[0].size(), kChunkBytes);
  EXPECT_EQ(chunks[1].offset, kChunkBytes);
  ASSERT_EQ(chunks[1].pieces.size(), 1u);
  EXPECT_EQ(chunks[1].pieces[0].data(),
            reinterpret_cast<const char*>(bytes->data()) + kChunkBytes);
  EXPECT_EQ(chunks[1].size(), 10u);
  const std::weak_ptr<std::vector<uint8_t>> alive = bytes;
  bytes.reset();
  EXPECT_FALSE(alive.expired());  // the chunks keep it
  chunks.clear();
  EXPECT_TRUE(alive.expired());
}

TEST(ChunkingTest, LendingStopsWhenNotReady) {
  std::vector<uint8_t> bytes(3 * kChunkBytes);
  int lent = 0;
  EXPECT_FALSE(LendBytesChunks(
      0, bytes.data(), bytes.size(), nullptr,
      [&](LentChunk&&) {
        ++lent;
        return true;
      },
      [](size_t offset, size_t) { return offset < kChunkBytes; }));
  EXPECT_EQ(lent, 1);
}

// A chunk copied into a message, and a message's chunk owned without a copy.
TEST(ChunkingTest, LentChunksCopyAndOwn) {
  const std::string text = "seven bytes and more";
  LentChunk lent;
  lent.index = 2;
  lent.offset = 40;
  lent.pieces = {absl::string_view(text).substr(0, 5),
                 absl::string_view(text).substr(5)};
  const v1::ArrayChunk copy = lent.Copy();
  EXPECT_EQ(copy.index(), 2u);
  EXPECT_EQ(copy.offset(), 40u);
  EXPECT_EQ(copy.data(), text);

  v1::ArrayChunk message = copy;
  const char* inside = message.data().data();
  const LentChunk own = LentChunk::Own(std::move(message));
  EXPECT_EQ(own.index, 2u);
  EXPECT_EQ(own.offset, 40u);
  ASSERT_EQ(own.pieces.size(), 1u);
  EXPECT_EQ(own.pieces[0].data(), inside);
  EXPECT_EQ(std::string(own.pieces[0]), text);
  EXPECT_NE(own.owner, nullptr);
}

// A chunk in pieces is placed piece by piece, as if it were one.
TEST(ChunkingTest, SequencerTakesChunksInPieces) {
  std::vector<Tensor> arrays;
  arrays.emplace_back(DType::kInt32, Shape{3});  // 12 bytes
  ChunkSequencer sequencer = ChunkSequencer::ForTensors(arrays, "output");
  const std::string bytes = "0123456789ab";
  ReceivedChunk first;
  first.pieces = {absl::string_view(bytes).substr(0, 3),
                  absl::string_view(bytes).substr(3, 1)};
  ASSERT_TRUE(sequencer.Accept(first).ok());
  ReceivedChunk rest;
  rest.offset = 4;
  rest.pieces = {absl::string_view(bytes).substr(4, 8)};
  ASSERT_TRUE(sequencer.Accept(rest).ok());
  EXPECT_TRUE(sequencer.done());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(arrays[0].data()), 12),
            bytes);
  ReceivedChunk more;
  more.offset = 12;
  more.pieces = {"x"};
  EXPECT_FALSE(sequencer.Accept(more).ok());
}

TEST(ChunkingTest, ExactMultipleHasNoEmptyTail) {
  Tensor t(DType::kFloat64, {kMiB / 8 * 2});  // exactly 2 MiB
  const std::vector<v1::ArrayChunk> chunks = Collect(0, t);
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[1].offset(), kMiB);
  EXPECT_EQ(chunks[1].data().size(), kMiB);
}

TEST(ChunkingTest, EmptyTensorSendsNothing) {
  Tensor t(DType::kInt32, {0, 7});
  int writes = 0;
  EXPECT_TRUE(SendTensorChunks(0, t, [&](v1::ArrayChunk&&) {
    ++writes;
    return true;
  }));
  EXPECT_EQ(writes, 0);
}

TEST(ChunkingTest, SendChunksStopsAtFailedWrite) {
  std::vector<size_t> filled;
  int writes = 0;
  const bool ok = SendChunks(
      1, 3 * kMiB + 10,
      [&](size_t offset, size_t length, uint8_t* dst) {
        filled.push_back(offset);
        std::memset(dst, 7, length);
      },
      [&](v1::ArrayChunk&& c) {
        ++writes;
        return writes < 2;  // the second write fails
      });
  EXPECT_FALSE(ok);
  EXPECT_EQ(writes, 2);
  EXPECT_EQ(filled, (std::vector<size_t>{0, kMiB}));
}

TEST(ChunkingTest, SendChunksUsesFill) {
  std::vector<v1::ArrayChunk> chunks;
  ASSERT_TRUE(SendChunks(
      2, kMiB + 3,
      [](size_t offset, size_t length, uint8_t* dst) {
        for (size_t i = 0; i < length; ++i) dst[i] = (offset + i) % 251;
      },
      [&](v1::ArrayChunk&& c) {
        chunks.push_back(std::move(c));
        return true;
      }));
  ASSERT_EQ(chunks.size(), 2u);
  ASSERT_EQ(chunks[1].data().size(), 3u);
  EXPECT_EQ(chunks[1].offset(), kMiB);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(static_cast<uint8_t>(chunks[1].data()[i]), (kMiB + i) % 251);
  }
}

TEST(ChunkSequencerTest, ReassemblesTensorsExactly) {
  const Tensor big = BigTensor();
  Tensor small(DType::kInt64, {3});
  for (int i = 0; i < 3; ++i) small.data_as<int64_t>()[i] = -7 * i - 1;
  const Tensor empty(DType::kFloat32, {0});

  std::vector<Tensor> dst;
  dst.emplace_back(DType::kFloat32, Shape{5, 128, 1024});
  dst.emplace_back(DType::kFloat32, Shape{0});  // empty, in the middle
  dst.emplace_back(DType::kInt64, Shape{3});
  ChunkSequencer seq = ChunkSequencer::ForTensors(dst, "argument");

  std::vector<v1::ArrayChunk> all = Collect(0, big);
  for (auto& c : Collect(1, empty)) all.push_back(std::move(c));
  for (auto& c : Collect(2, small)) all.push_back(std::move(c));
  ASSERT_EQ(all.size(), 4u);
  for (size_t i = 0; i < all.size(); ++i) {
    if (i < 3) {
      EXPECT_TRUE(StatusIs(seq.Finish(), absl::StatusCode::kInvalidArgument,
                           {"stream ended early"}));
    }
    const absl::Status s = seq.Accept(all[i]);
    ASSERT_TRUE(s.ok()) << i << ": " << s;
  }
  EXPECT_TRUE(seq.Finish().ok()) << seq.Finish();
  EXPECT_EQ(std::memcmp(dst[0].data(), big.data(), big.num_bytes()), 0);
  EXPECT_EQ(dst[2].data_as<int64_t>()[0], -1);
  EXPECT_EQ(dst[2].data_as<int64_t>()[1], -8);
  EXPECT_EQ(dst[2].data_as<int64_t>()[2], -15);
}

TEST(ChunkSequencerTest, AllEmptyFinishesImmediately) {
  ChunkSequencer seq({0, 0}, {nullptr, nullptr}, "output");
  EXPECT_TRUE(seq.Finish().ok());
  EXPECT_TRUE(StatusIs(seq.Accept(Chunk(0, 0, "x")),
                       absl::StatusCode::kInvalidArgument,
                       {"chunk out of order"}));
}

TEST(ChunkSequencerTest, SinksSeeOffsets) {
  std::vector<std::pair<size_t, std::string>> seen;
  ChunkSequencer seq({5}, {[&](size_t off, absl::string_view d) {
                       seen.emplace_back(off, std::string(d));
                     }},
                     "output");
  ASSERT_TRUE(seq.Accept(Chunk(0, 0, "ab")).ok());
  ASSERT_TRUE(seq.Accept(Chunk(0, 2, "cde")).ok());
  EXPECT_TRUE(seq.Finish().ok());
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], (std::pair<size_t, std::string>{0, "ab"}));
  EXPECT_EQ(seen[1], (std::pair<size_t, std::string>{2, "cde"}));
}

ChunkSequencer TwoArrays(std::string* a, std::string* b) {
  a->assign(10, '\0');
  b->assign(4, '\0');
  return ChunkSequencer({10, 4},
                        {[a](size_t off, absl::string_view d) {
                           a->replace(off, d.size(), d.data(), d.size());
                         },
                         [b](size_t off, absl::string_view d) {
                           b->replace(off, d.size(), d.data(), d.size());
                         }},
                        "argument");
}

TEST(ChunkSequencerTest, RejectsOutOfOrderOffset) {
  std::string a, b;
  ChunkSequencer seq = TwoArrays(&a, &b);
  ASSERT_TRUE(seq.Accept(Chunk(0, 0, "0123")).ok());
  EXPECT_TRUE(StatusIs(seq.Accept(Chunk(0, 6, "6789")),
                       absl::StatusCode::kInvalidArgument,
                       {"chunk out of order: got argument 0 at offset 6, "
                        "expected argument 0 at offset 4"}));
  EXPECT_TRUE(StatusIs(seq.Accept(Chunk(0, 0, "0123")),
                       absl::StatusCode::kInvalidArgument,
                       {"got argument 0 at offset 0", "at offset 4"}));
}

TEST(ChunkSequencerTest, RejectsWrongIndex) {
  std::string a, b;
  ChunkSequencer seq = TwoArrays(&a, &b);
  // Array 1 before array 0 is done.
  EXPECT_TRUE(StatusIs(seq.Accept(Chunk(1, 0, "ab")),
                       absl::StatusCode::kInvalidArgument,
                       {"chunk out of order: got argument 1 at offset 0, "
                        "expected argument 0 at offset 0"}));
  // No such array.
  EXPECT_TRUE(StatusIs(seq.Accept(Chunk(7, 0, "ab")),
                       absl::StatusCode::kInvalidArgument,
                       {"chunk for argument 7, but there are 2 arguments"}));
  // Back to array 0 after it is complete.
  ASSERT_TRUE(seq.Accept(Chunk(0, 0, "0123456789")).ok());
  EXPECT_TRUE(StatusIs(seq.Accept(Chunk(0, 10, "x")),
                       absl::StatusCode::kInvalidArgument,
                       {"got argument 0 at offset 10", "expected argument 1"}));
  ASSERT_TRUE(seq.Accept(Chunk(1, 0, "wxyz")).ok());
  EXPECT_TRUE(seq.Finish().ok());
  EXPECT_EQ(a, "0123456789");
  EXPECT_EQ(b, "wxyz");
}

TEST(ChunkSequencerTest, RejectsOverrun) {
  std::string a, b;
  ChunkSequencer seq = TwoArrays(&a, &b);
  ASSERT_TRUE(seq.Accept(Chunk(0, 0, "01234567")).ok());
  EXPECT_TRUE(StatusIs(seq.Accept(Chunk(0, 8, "89X")),
                       absl::StatusCode::kInvalidArgument,
                       {"argument 0 has 10 bytes, but chunks carry more"}));
  // The rejected chunk was not placed.
  EXPECT_EQ(a.substr(8), std::string(2, '\0'));
  EXPECT_TRUE(StatusIs(seq.Finish(), absl::StatusCode::kInvalidArgument,
                       {"stream ended early: argument 0 has 8 of its 10 "
                        "bytes"}));
}

TEST(ChunkSequencerTest, FinishReportsIncompleteArray) {
  std::string a, b;
  ChunkSequencer seq = TwoArrays(&a, &b);
  EXPECT_TRUE(StatusIs(seq.Finish(), absl::StatusCode::kInvalidArgument,
                       {"stream ended early: argument 0 has 0 of its 10 "
                        "bytes"}));
  ASSERT_TRUE(seq.Accept(Chunk(0, 0, "0123456789")).ok());
  ASSERT_TRUE(seq.Accept(Chunk(1, 0, "ab")).ok());
  EXPECT_TRUE(StatusIs(seq.Finish(), absl::StatusCode::kInvalidArgument,
                       {"stream ended early: argument 1 has 2 of its 4 "
                        "bytes"}));
}

}  // namespace
}  // namespace shardmap
