#include "rpc/chunk_message.h"

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "rpc/raw_method.h"
#include "shardmap/v1/coordinator.pb.h"
#include "shardmap/v1/worker.pb.h"
#include "tests/unit/byte_buffers.h"

namespace shardmap {
namespace {

LentChunk ChunkOver(const std::vector<uint8_t>& bytes, uint32_t index,
                    uint64_t offset, std::shared_ptr<const void> owner) {
  LentChunk chunk;
  chunk.index = index;
  chunk.offset = offset;
  if (!bytes.empty()) {
    chunk.pieces.emplace_back(reinterpret_cast<const char*>(bytes.data()),
                              bytes.size());
  }
  chunk.owner = std::move(owner);
  return chunk;
}

// What any protobuf peer parses is the wrapper message with the chunk in
// it, whichever wrapper it is.
TEST(ChunkMessageTest, IsTheWrapperMessageWithItsChunk) {
  auto bytes = std::make_shared<std::vector<uint8_t>>(70000);
  for (size_t i = 0; i < bytes->size(); ++i) (*bytes)[i] = (i * 7 + 3) % 256;
  const LentChunk chunk = ChunkOver(*bytes, 3, 123456789012ull, bytes);
  const std::string want(bytes->begin(), bytes->end());

  v1::ShardRequest request;
  ASSERT_TRUE(request.ParseFromString(BufferBytes(
      EncodeChunkMessage(v1::ShardRequest::kChunkFieldNumber, chunk))));
  ASSERT_TRUE(request.has_chunk());
  EXPECT_EQ(request.chunk().index(), 3u);
  EXPECT_EQ(request.chunk().offset(), 123456789012ull);
  EXPECT_EQ(request.chunk().data(), want);

  v1::RunJobResponse response;
  ASSERT_TRUE(response.ParseFromString(BufferBytes(
      EncodeChunkMessage(v1::RunJobResponse::kChunkFieldNumber, chunk))));
  ASSERT_TRUE(response.has_chunk());
  EXPECT_EQ(response.chunk().data(), want);

  // Byte for byte what protobuf itself writes.
  v1::ShardResponse reference;
  *reference.mutable_chunk() = chunk.Copy();
  EXPECT_EQ(BufferBytes(EncodeChunkMessage(v1::ShardResponse::kChunkFieldNumber,
                                           chunk)),
            reference.SerializeAsString());
}

TEST(ChunkMessageTest, IndexAndOffsetZeroAndNoBytes) {
  const std::vector<uint8_t> none;
  v1::ShardRequest request;
  ASSERT_TRUE(request.ParseFromString(BufferBytes(EncodeChunkMessage(
      v1::ShardRequest::kChunkFieldNumber, ChunkOver(none, 0, 0, nullptr)))));
  ASSERT_TRUE(request.has_chunk());
  EXPECT_EQ(request.chunk().index(), 0u);
  EXPECT_TRUE(request.chunk().data().empty());
}

// The buffer refers to the lent bytes and holds their owner until gRPC (or
// here, the last copy of the buffer) lets go.
TEST(ChunkMessageTest, HoldsTheOwnerAsLongAsTheBuffer) {
  auto bytes = std::make_shared<std::vector<uint8_t>>(kInlineChunkBytes, 9);
  const std::weak_ptr<std::vector<uint8_t>> alive = bytes;
  auto buffer = std::make_unique<grpc::ByteBuffer>(EncodeChunkMessage(
      v1::ShardRequest::kChunkFieldNumber, ChunkOver(*bytes, 1, 0, bytes)));
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(buffer->Dump(&slices).ok());
  ASSERT_EQ(slices.size(), 2u);
  EXPECT_EQ(slices[1].begin(), bytes->data());  // not copied
  slices.clear();
  bytes.reset();
  EXPECT_FALSE(alive.expired());
  buffer.reset();
  EXPECT_TRUE(alive.expired());
}

// Without an owner the bytes are copied: the caller may reuse them at once.
// So are small ones, which are cheaper to copy than to lend.
TEST(ChunkMessageTest, CopiesBytesWithoutAnOwnerOrSmall) {
  std::vector<uint8_t> bytes(kInlineChunkBytes, 1);
  const grpc::ByteBuffer buffer = EncodeChunkMessage(
      v1::ShardRequest::kChunkFieldNumber, ChunkOver(bytes, 0, 0, nullptr));
  auto small = std::make_shared<std::vector<uint8_t>>(100, 1);
  const std::weak_ptr<std::vector<uint8_t>> alive = small;
  const grpc::ByteBuffer small_buffer = EncodeChunkMessage(
      v1::ShardRequest::kChunkFieldNumber, ChunkOver(*small, 0, 0, small));
  std::fill(bytes.begin(), bytes.end(), 2);
  std::fill(small->begin(), small->end(), 2);
  small.reset();
  EXPECT_TRUE(alive.expired());  // not held by the buffer
  v1::ShardRequest request;
  ASSERT_TRUE(request.ParseFromString(BufferBytes(buffer)));
  EXPECT_EQ(request.chunk().data(), std::string(kInlineChunkBytes, '\1'));
  ASSERT_TRUE(request.ParseFromString(BufferBytes(small_buffer)));
  EXPECT_EQ(request.chunk().data(), std::string(100, '\1'));
}

TEST(ChunkMessageTest, MessagesRoundTrip) {
  v1::ShardRequest request;
  request.mutable_job()->set_function("identity");
  request.mutable_job()->set_device_id(3);
  grpc::ByteBuffer buffer;
  ASSERT_TRUE(EncodeMessage(request, &buffer));
  v1::ShardRequest back;
  ASSERT_TRUE(DecodeMessage(&buffer, &back));
  EXPECT_EQ(back.job().function(), "identity");
  EXPECT_EQ(back.job().device_id(), 3);

  grpc::Slice junk(std::string("\xff\xff\xff", 3));
  grpc::ByteBuffer bad(&junk, 1);
  EXPECT_FALSE(DecodeMessage(&bad, &back));
}

std::string Joined(const ReceivedChunk& chunk) {
  std::string all;
  for (absl::string_view piece : chunk.pieces) {
    all.append(piece.data(), piece.size());
  }
  return all;
}

// A buffer over `bytes` cut into slices of `cut` bytes, as gRPC hands a
// received message over.
grpc::ByteBuffer Received(const std::string& bytes, size_t cut) {
  std::vector<grpc::Slice> slices;
  for (size_t at = 0; at < bytes.size(); at += cut) {
    slices.emplace_back(bytes.substr(at, cut));
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

// Received chunks stay in the buffer's slices, whoever wrote them: the
// encoder above, or protobuf itself (the Python client), and however the
// message is cut.
TEST(ChunkMessageTest, DecodesAChunkWithoutCopyingIt) {
  auto bytes = std::make_shared<std::vector<uint8_t>>(300000);
  for (size_t i = 0; i < bytes->size(); ++i) (*bytes)[i] = (i * 13 + 1) % 256;
  const LentChunk lent = ChunkOver(*bytes, 7, 1 << 20, bytes);
  const std::string want(bytes->begin(), bytes->end());

  const grpc::ByteBuffer encoded =
      EncodeChunkMessage(v1::RunJobRequest::kChunkFieldNumber, lent);
  std::optional<ReceivedChunk> got =
      DecodeChunkMessage(encoded, v1::RunJobRequest::kChunkFieldNumber);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->index, 7u);
  EXPECT_EQ(got->offset, uint64_t{1} << 20);
  ASSERT_FALSE(got->pieces.empty());
  EXPECT_EQ(reinterpret_cast<const uint8_t*>(got->pieces[0].data()),
            bytes->data());  // the very bytes lent: nothing copied
  EXPECT_EQ(Joined(*got), want);

  v1::RunJobRequest request;
  *request.mutable_chunk() = lent.Copy();
  for (size_t cut : {size_t{1}, size_t{5}, size_t{4096}, size_t{1} << 30}) {
    const grpc::ByteBuffer buffer = Received(request.SerializeAsString(), cut);
    got = DecodeChunkMessage(buffer, v1::RunJobRequest::kChunkFieldNumber);
    ASSERT_TRUE(got.has_value()) << cut;
    EXPECT_EQ(got->index, 7u);
    EXPECT_EQ(Joined(*got), want) << cut;
    EXPECT_EQ(got->size(), want.size());
  }
  // The chunk keeps its slices after the buffer is gone.
  {
    const grpc::ByteBuffer buffer = Received(request.SerializeAsString(), 999);
    got = DecodeChunkMessage(buffer, v1::RunJobRequest::kChunkFieldNumber);
  }
  EXPECT_EQ(Joined(*got), want);
}

// Anything but a lone chunk with its data last is left to a full parse.
TEST(ChunkMessageTest, LeavesOtherMessagesToTheParser) {
  v1::RunJobRequest spec;
  spec.mutable_spec()->set_function("identity");
  const grpc::ByteBuffer other = Received(spec.SerializeAsString(), 1 << 20);
  EXPECT_FALSE(DecodeChunkMessage(other, v1::RunJobRequest::kChunkFieldNumber));

  // The chunk under another field number than the one asked for.
  v1::RunJobRequest chunk;
  chunk.mutable_chunk()->set_index(1);
  chunk.mutable_chunk()->set_data("abc");
  const std::string wire = chunk.SerializeAsString();
  EXPECT_FALSE(DecodeChunkMessage(Received(wire, 1 << 20), 5));

  // The data before the index (legal protobuf, written by no one we know).
  v1::ArrayChunk data_only;
  data_only.set_data("abc");
  v1::ArrayChunk index_only;
  index_only.set_index(4);
  const std::string inner =
      data_only.SerializeAsString() + index_only.SerializeAsString();
  v1::RunJobRequest outer;
  ASSERT_TRUE(outer.mutable_chunk()->ParseFromString(inner));
  std::string reordered;
  reordered.push_back(
      static_cast<char>((v1::RunJobRequest::kChunkFieldNumber << 3) | 2));
  reordered.push_back(static_cast<char>(inner.size()));
  reordered += inner;
  EXPECT_FALSE(DecodeChunkMessage(Received(reordered, 1 << 20),
                                  v1::RunJobRequest::kChunkFieldNumber));
  v1::RunJobRequest parsed;  // which the parser reads as protobuf says
  ASSERT_TRUE(parsed.ParseFromString(reordered));
  EXPECT_EQ(parsed.chunk().index(), 4u);

  // Cut short.
  EXPECT_FALSE(DecodeChunkMessage(Received(wire.substr(0, wire.size() - 1), 1),
                                  v1::RunJobRequest::kChunkFieldNumber));
}

// A stream of given messages, as a raw reader.
class FakeReader : public RawReader {
 public:
  explicit FakeReader(std::vector<std::string> messages)
      : messages_(std::move(messages)) {}
  bool NextMessageSize(uint32_t* size) override {
    if (next_ >= messages_.size()) return false;
    *size = static_cast<uint32_t>(messages_[next_].size());
    return true;
  }
  bool Read(grpc::ByteBuffer* buffer) override {
    if (next_ >= messages_.size()) return false;
    *buffer = Received(messages_[next_++], 3);
    return true;
  }

 private:
  std::vector<std::string> messages_;
  size_t next_ = 0;
};

// A chunk in a form the fast path leaves alone (here an unknown field after
// the data, as a newer peer might send) still comes as a chunk, parsed;
// other messages come whole; bytes that are no message end the reading.
TEST(ChunkMessageTest, ReadChunkedTakesEveryValidChunk) {
  v1::ShardRequest fast;
  fast.mutable_chunk()->set_index(2);
  fast.mutable_chunk()->set_data("fast");
  v1::ShardRequest slow = fast;
  slow.mutable_chunk()->set_data("slow");
  std::string slow_wire = slow.SerializeAsString();
  // Field 9 of ArrayChunk (unknown), varint 1, inside the chunk.
  slow_wire[1] = static_cast<char>(slow_wire[1] + 2);
  slow_wire += std::string("\x48\x01", 2);
  v1::ShardRequest job;
  job.mutable_job()->set_function("identity");
  FakeReader reader({fast.SerializeAsString(), slow_wire,
                     job.SerializeAsString(), std::string("\xff\xff", 2)});

  v1::ShardRequest message;
  std::optional<ReceivedChunk> chunk;
  bool malformed = false;
  ASSERT_TRUE(ReadChunked(&reader, v1::ShardRequest::kChunkFieldNumber,
                          &message, &chunk, &malformed));
  ASSERT_TRUE(chunk.has_value());
  EXPECT_EQ(Joined(*chunk), "fast");
  ASSERT_TRUE(ReadChunked(&reader, v1::ShardRequest::kChunkFieldNumber,
                          &message, &chunk, &malformed));
  ASSERT_TRUE(chunk.has_value());
  EXPECT_EQ(chunk->index, 2u);
  EXPECT_EQ(Joined(*chunk), "slow");
  EXPECT_FALSE(message.has_chunk());
  ASSERT_TRUE(ReadChunked(&reader, v1::ShardRequest::kChunkFieldNumber,
                          &message, &chunk, &malformed));
  EXPECT_FALSE(chunk.has_value());
  EXPECT_EQ(message.job().function(), "identity");
  EXPECT_FALSE(malformed);
  EXPECT_FALSE(ReadChunked(&reader, v1::ShardRequest::kChunkFieldNumber,
                           &message, &chunk, &malformed));
  EXPECT_TRUE(malformed);
}

// An empty chunk (index and offset 0, no bytes) is a wrapper of length 0;
// a field number past protobuf's range is not a chunk.
TEST(ChunkMessageTest, EmptyChunksAndOutOfRangeTags) {
  v1::RunJobRequest empty;
  empty.mutable_chunk();
  const std::string wire = empty.SerializeAsString();
  ASSERT_EQ(wire.size(), 2u);
  std::optional<ReceivedChunk> got = DecodeChunkMessage(
      Received(wire, 1 << 20), v1::RunJobRequest::kChunkFieldNumber);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->size(), 0u);
  EXPECT_TRUE(got->pieces.empty());

  // Field (2^32 + 2), which a 32-bit cast would read as field 2.
  std::string huge;
  uint64_t tag = (((uint64_t{1} << 32) + 2) << 3) | 2;
  while (tag >= 0x80) {
    huge.push_back(static_cast<char>((tag & 0x7f) | 0x80));
    tag >>= 7;
  }
  huge.push_back(static_cast<char>(tag));
  huge.push_back('\0');
  EXPECT_FALSE(DecodeChunkMessage(Received(huge, 1 << 20),
                                  v1::RunJobRequest::kChunkFieldNumber));
}

TEST(RawMethodTest, FindsMethodsInTheProtosOrder) {
  EXPECT_EQ(MethodIndex("shardmap.v1.Coordinator", "RunJob"), 0);
  EXPECT_EQ(MethodIndex("shardmap.v1.Worker", "RunShard"), 0);
  EXPECT_EQ(MethodIndex("shardmap.v1.Worker", "RunShards"), 1);
}

}  // namespace
}  // namespace shardmap
