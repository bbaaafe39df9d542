// The job streams' messages as gRPC byte buffers, for the streams that
// send array chunks without copying them (the coordinator's RunJob and
// RunShard calls).
//
// A chunk message is, on the wire, exactly a serialized wrapper message
// (RunJobResponse, ShardRequest, ...) whose one field is an ArrayChunk, so
// every protobuf peer reads it as usual. EncodeChunkMessage serializes the
// small header and appends the chunk's bytes as a slice over the lent
// memory (LentChunk), which holds the chunk's owner until gRPC lets go of
// it: once the bytes are in the kernel, or the call failed.
#ifndef SHARDMAP_RPC_CHUNK_MESSAGE_H_
#define SHARDMAP_RPC_CHUNK_MESSAGE_H_

#include <grpcpp/impl/codegen/proto_utils.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/sync_stream.h>

#include <cstdint>
#include <optional>

#include "wire/chunking.h"

namespace shardmap {

// The serialized wrapper message whose field `chunk_field` holds `chunk`:
// its bytes lent, or copied when it has no owner or is small (under
// kInlineChunkBytes).
grpc::ByteBuffer EncodeChunkMessage(uint32_t chunk_field,
                                    const LentChunk& chunk);

// `message` serialized, as gRPC serializes it.
// False for a message protobuf cannot serialize (over 2 GiB, which no
// channel would carry).
template <typename Message>
bool EncodeMessage(const Message& message, grpc::ByteBuffer* buffer) {
  bool own_buffer = false;
  return grpc::SerializationTraits<Message>::Serialize(message, buffer,
                                                       &own_buffer)
      .ok();
}

// Parses `buffer` (consumed) into `message`. False if it is not one.
template <typename Message>
bool DecodeMessage(grpc::ByteBuffer* buffer, Message* message) {
  return grpc::SerializationTraits<Message>::Deserialize(buffer, message).ok();
}

// The same on a raw stream (rpc/raw_method.h), client's or server's.
using RawReader = grpc::internal::ReaderInterface<grpc::ByteBuffer>;
using RawWriter = grpc::internal::WriterInterface<grpc::ByteBuffer>;

// The stream's next message. False at the end of the stream, and for a
// message that is not a `Message` (then `*malformed` is set).
template <typename Message>
bool ReadMessage(RawReader* stream, Message* message, bool* malformed) {
  grpc::ByteBuffer buffer;
  if (!stream->Read(&buffer)) return false;
  if (DecodeMessage(&buffer, message)) return true;
  *malformed = true;
  return false;
}

// Writes `message`, with the end of the stream (WriteLast) if `last`.
// False if the stream broke (or the message cannot be serialized).
template <typename Message>
bool WriteMessage(RawWriter* stream, const Message& message, bool last) {
  grpc::ByteBuffer buffer;
  if (!EncodeMessage(message, &buffer)) return false;
  grpc::WriteOptions options;
  if (last) options.set_last_message();
  return stream->Write(buffer, options);
}

// Writes the chunk message (EncodeChunkMessage) the same way.
bool WriteChunkMessage(RawWriter* stream, uint32_t chunk_field,
                       const LentChunk& chunk, bool last);

// The chunk of a chunk message, its bytes left in `buffer`'s slices (which
// the chunk's owner holds): for a message whose only field is
// `chunk_field`, an ArrayChunk with its `data` last, as protobuf writes
// one. nullopt for any other message, which the caller parses whole.
std::optional<ReceivedChunk> DecodeChunkMessage(const grpc::ByteBuffer& buffer,
                                                uint32_t chunk_field);

// ReadMessage for a reader that takes chunks without a copy: a chunk
// message comes as `*chunk` (without a copy when DecodeChunkMessage reads
// it; a chunk in any other valid form is parsed, then moved there), any
// other message in `message` (and `*chunk` is reset).
template <typename Message>
bool ReadChunked(RawReader* stream, uint32_t chunk_field, Message* message,
                 std::optional<ReceivedChunk>* chunk, bool* malformed) {
  grpc::ByteBuffer buffer;
  if (!stream->Read(&buffer)) return false;
  *chunk = DecodeChunkMessage(buffer, chunk_field);
  if (chunk->has_value()) return true;
  if (!DecodeMessage(&buffer, message)) {
    *malformed = true;
    return false;
  }
  TakeChunk(message, chunk);  // a chunk in another valid form
  return true;
}

}  // namespace shardmap

#endif  // SHARDMAP_RPC_CHUNK_MESSAGE_H_
