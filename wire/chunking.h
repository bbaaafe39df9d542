// Arrays travel as streams of ArrayChunk messages: array by array, each in
// increasing byte offset, each chunk at most kChunkBytes. This file holds
// the two halves: cutting an array's bytes into chunks, and checking and
// placing received chunks.
#ifndef SHARDMAP_CORE_CHUNKING_H_
#define SHARDMAP_CORE_CHUNKING_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/tensor.h"
#include "shardmap/v1/common.pb.h"

namespace shardmap {

// Bytes of array data in one message. Well under the 4 MiB protocol cap.
inline constexpr size_t kChunkBytes = 1 << 20;
// The message size limit every channel and server sets explicitly: one
// chunk plus headroom for a job header with long names.
inline constexpr int kMaxMessageBytes = 8 << 20;
// The most array bytes that ride as chunks inside a header message
// (ShardJob.chunks, ShardOutputs.chunks, JobResult.chunks) instead of as
// chunk messages of their own: a small request or answer is then one
// message, and one packet, instead of two or more.
inline constexpr size_t kInlineChunkBytes = 64 << 10;

// Asked before each chunk's bytes are read: ready(offset, length) for
// bytes [offset, offset+length) of the array; false stops the sending.
// Null: every byte is there.
using ChunkReady = std::function<bool(size_t, size_t)>;

// A chunk whose bytes are not its own: pieces of memory that `owner` (or
// a copy of it) keeps alive. Going out, they are an array's bytes lent to
// a sender that writes memory by reference (rpc/chunk_message.h), which
// keeps `owner` until they are sent (one that cannot copies them: Copy);
// coming in, they are left where the message arrived instead of being
// copied into one string. On the wire it is an ArrayChunk.
struct ChunkView {
  uint32_t index = 0;
  uint64_t offset = 0;
  std::vector<absl::string_view> pieces;  // the bytes, in order
  std::shared_ptr<const void> owner;

  // A message's chunk, its bytes moved, not copied.
  static ChunkView Own(v1::ArrayChunk&& chunk);
  size_t size() const;
  // The chunk as a message of its own, its bytes copied.
  v1::ArrayChunk Copy() const;
};
// The two directions, named for what they hold.
using LentChunk = ChunkView;
using ReceivedChunk = ChunkView;

// The chunk of a parsed message that has one (a `chunk` field), into
// `*chunk`, its bytes moved, not copied; `*chunk` is reset otherwise.
template <typename Message>
void TakeChunk(Message* message, std::optional<ReceivedChunk>* chunk) {
  chunk->reset();
  if (!message->has_chunk()) return;
  *chunk = ReceivedChunk::Own(std::move(*message->mutable_chunk()));
  message->clear_chunk();
}

// Produces the chunks of array `index` of `total` bytes. `fill(offset,
// length, dst)` copies the array's bytes [offset, offset+length) to dst;
// `write(chunk)` sends one chunk and returns false if the stream broke.
// Returns false as soon as a write fails or `ready` says no. An empty
// array sends no chunk.
bool SendChunks(uint32_t index, size_t total,
                const std::function<void(size_t, size_t, uint8_t*)>& fill,
                const std::function<bool(v1::ArrayChunk&&)>& write,
                const ChunkReady& ready = nullptr);
// The same for `size` contiguous bytes at `data`: each chunk copies its
// bytes once, straight from `data`.
bool SendBytesChunks(uint32_t index, const uint8_t* data, size_t size,
                     const std::function<bool(v1::ArrayChunk&&)>& write,
                     const ChunkReady& ready = nullptr);
// The same, lending the bytes instead: each chunk refers to `data`, which
// `owner` keeps alive (null: the caller keeps it alive until `lend` is done
// with every chunk).
bool LendBytesChunks(uint32_t index, const uint8_t* data, size_t size,
                     const std::shared_ptr<const void>& owner,
                     const std::function<bool(LentChunk&&)>& lend,
                     const ChunkReady& ready = nullptr);
// The same for a whole tensor.
bool SendTensorChunks(uint32_t index, const Tensor& tensor,
                      const std::function<bool(v1::ArrayChunk&&)>& write);
// The chunks of array `index`, appended to a header message's `chunks`
// (kInlineChunkBytes).
void AppendTensorChunks(
    uint32_t index, const Tensor& tensor,
    google::protobuf::RepeatedPtrField<v1::ArrayChunk>* chunks);

// Checks that chunks arrive in order (array by array, offsets contiguous,
// no overrun) and hands each one to its array's sink.
// Not thread-safe; one stream feeds one sequencer.
class ChunkSequencer {
 public:
  // sink(offset, data): place `data` at byte `offset` of the array.
  using Sink = std::function<void(size_t, absl::string_view)>;

  // `what` names the arrays in messages ("argument", "output").
  ChunkSequencer(std::vector<size_t> sizes, std::vector<Sink> sinks,
                 std::string what);
  // A sink that writes into `tensor` (which must outlive the sequencer).
  static Sink Into(Tensor& tensor);
  // Sinks that write into `tensors` (which must outlive the sequencer).
  static ChunkSequencer ForTensors(std::vector<Tensor>& tensors,
                                   std::string what);

  // INVALID_ARGUMENT for a chunk out of order, for an unknown array, or
  // past the end of its array.
  absl::Status Accept(const v1::ArrayChunk& chunk);
  // The same for a chunk left in pieces: each goes to the sink in turn.
  absl::Status Accept(const ReceivedChunk& chunk);
  // Accept for each of a header message's chunks, in order; the first
  // error.
  absl::Status AcceptAll(
      const google::protobuf::RepeatedPtrField<v1::ArrayChunk>& chunks);
  // INVALID_ARGUMENT if any array is incomplete.
  absl::Status Finish() const;
  // True once every array is complete.
  bool done() const { return current_ >= sizes_.size(); }

 private:
  std::vector<size_t> sizes_;
  std::vector<Sink> sinks_;
  std::string what_;
  size_t current_ = 0;   // array being received
  size_t received_ = 0;  // bytes of it so far
};

}  // namespace shardmap

#endif  // SHARDMAP_CORE_CHUNKING_H_
