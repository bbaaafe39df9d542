// A job stream's interface (JobStream on the coordinator's RunJob,
// ShardStream on the worker's RunShard) over a raw byte-buffer server
// stream: messages are parsed and serialized as gRPC's typed streams do,
// and chunks are read and written without copies (rpc/chunk_message.h).
// `In` and `Out` are the messages the stream reads and writes; both have a
// `chunk` field.
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
  // Not owned; both outlive the adapter.
  RawStreamAdapter(grpc::ServerContext* context, RawServerStream* stream)
      : context_(context), stream_(stream) {}

  bool Read(In* message) override {
    // A message that does not parse ends the reading, as it does on
    // gRPC's typed streams.
    bool malformed = false;
    return ReadMessage(stream_, message, &malformed);
  }
  bool ReadChunked(In* message, std::optional<ReceivedChunk>* chunk) override {
    bool malformed = false;
    return shardmap::ReadChunked(stream_, In::kChunkFieldNumber, message, chunk,
                                 &malformed);
  }
  bool Write(const Out& message) override {
    return WriteMessage(stream_, message, false);
  }
  bool WriteLast(const Out& message) override {
    return WriteMessage(stream_, message, true);
  }
  bool WriteChunk(const LentChunk& chunk, bool last) override {
    return WriteChunkMessage(stream_, Out::kChunkFieldNumber, chunk, last);
  }
  bool cancelled() const override { return context_->IsCancelled(); }

 private:
  grpc::ServerContext* const context_;
  RawServerStream* const stream_;
};

}  // namespace shardmap

#endif  // SHARDMAP_RPC_RAW_STREAM_ADAPTER_H_
