// A job stream's interface (JobStream on the coordinator's RunJob,
// ShardStream on the worker's RunShard) over a raw byte-buffer server
// stream (a synchronous handler's, or a callback call's blocking facade,
// rpc/blocking_server_stream.h): messages are parsed and serialized as gRPC's
// typed streams do, and chunks are read and written without copies
// (rpc/chunk_message.h). `In` and `Out` are the messages the stream reads and
// writes; both have a `chunk` field.
//
// Not thread-safe, except cancelled(): as the interfaces.
#ifndef SHARDMAP_RPC_RAW_STREAM_ADAPTER_H_
#define SHARDMAP_RPC_RAW_STREAM_ADAPTER_H_

#include <grpcpp/server_context.h>

#include <optional>

#include "rpc/chunk_message.h"
#include "rpc/raw_method.h"
#include "wire/chunking.h"

namespace shardmap {

template <typename Interface, typename In, typename Out>
class RawStreamAdapter final : public Interface {
 public:
  // Not owned; all outlive the adapter.
  RawStreamAdapter(const grpc::ServerContextBase* context, RawReader* reader,
                   RawWriter* writer)
      : context_(context), reader_(reader), writer_(writer) {}
  RawStreamAdapter(const grpc::ServerContextBase* context,
                   RawServerStream* stream)
      : RawStreamAdapter(context, stream, stream) {}

  bool Read(In* message) override {
    // A message that does not parse ends the reading, as it does on
    // gRPC's typed streams.
    bool malformed = false;
    return ReadMessage(reader_, message, &malformed);
  }
  bool ReadChunked(In* message, std::optional<ReceivedChunk>* chunk) override {
    bool malformed = false;
    return shardmap::ReadChunked(reader_, In::kChunkFieldNumber, message, chunk,
                                 &malformed);
  }
  bool Write(const Out& message) override {
    return WriteMessage(writer_, message, false);
  }
  bool WriteLast(const Out& message) override {
    return WriteMessage(writer_, message, true);
  }
  bool WriteChunk(const LentChunk& chunk, bool last) override {
    return WriteChunkMessage(writer_, Out::kChunkFieldNumber, chunk, last);
  }
  bool cancelled() const override { return context_->IsCancelled(); }

 private:
  const grpc::ServerContextBase* const context_;
  RawReader* const reader_;
  RawWriter* const writer_;
};

}  // namespace shardmap

#endif  // SHARDMAP_RPC_RAW_STREAM_ADAPTER_H_
