// What the job streams' interfaces share. JobStream (client <-> coordinator),
// ShardChannel (coordinator -> worker) and ShardStream (the worker's end)
// each read and write one message type plus chunks, under the same method
// names: Read, ReadChunked, Write, WriteLast, WriteChunk(chunk, last). The
// helpers here are written once over those names.
//
// Header only; thread-compatible, as the streams are.
#ifndef SHARDMAP_WIRE_CHUNK_STREAM_H_
#define SHARDMAP_WIRE_CHUNK_STREAM_H_

#include <optional>
#include <variant>

#include "wire/chunking.h"
#include "wire/tail_writer.h"

namespace shardmap {

// An outgoing message of a job stream: a message of its own, or a chunk
// lent from an array.
template <typename Message>
using ChunkOr = std::variant<Message, LentChunk>;

// A TailWriter over `stream`: chunks go out with WriteChunk, messages with
// Write, and the last of either ends the stream (WriteLast, or
// WriteChunk's `last`) unless `keep_open` (a two-phase job's stream waits
// for the decision). `stream` must outlive the writer.
template <typename Message, typename Stream>
TailWriter<ChunkOr<Message>> ChunkTailWriter(Stream* stream,
                                             bool keep_open = false) {
  return TailWriter<ChunkOr<Message>>(
      [stream, keep_open](const ChunkOr<Message>& message, bool last) {
        last = last && !keep_open;
        if (const auto* chunk = std::get_if<LentChunk>(&message)) {
          return stream->WriteChunk(*chunk, last);
        }
        const auto& m = std::get<Message>(message);
        return last ? stream->WriteLast(m) : stream->Write(m);
      });
}

// ReadChunked for a stream that parses every message whole: Read, then
// the chunk moved out of the message (TakeChunk).
template <typename Stream, typename Message>
bool ReadTakingChunk(Stream* stream, Message* message,
                     std::optional<ReceivedChunk>* chunk) {
  chunk->reset();
  if (!stream->Read(message)) return false;
  TakeChunk(message, chunk);
  return true;
}

// WriteChunk for a stream that cannot lend: the chunk's bytes copied into
// a Message of their own.
template <typename Message, typename Stream>
bool WriteChunkCopy(Stream* stream, const LentChunk& chunk, bool last) {
  Message message;
  *message.mutable_chunk() = chunk.Copy();
  return last ? stream->WriteLast(message) : stream->Write(message);
}

}  // namespace shardmap

#endif  // SHARDMAP_WIRE_CHUNK_STREAM_H_
