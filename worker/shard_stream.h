// The stream of one RunShard call, as the job sees it: the coordinator's
// requests in (the job header, its argument chunks, then for a two-phase
// job the commit decision), the device's responses out. The Worker service
// adapts its gRPC stream to it; tests fake it.
#ifndef SHARDMAP_WORKER_SHARD_STREAM_H_
#define SHARDMAP_WORKER_SHARD_STREAM_H_

#include <optional>

#include "shardmap/v1/worker.pb.h"
#include "wire/chunk_stream.h"

namespace shardmap {

// Read and Write are called from one thread at a time; cancelled() from
// any thread.
class ShardStream {
 public:
  virtual ~ShardStream() = default;
  // The next request; false once the coordinator has closed its side or
  // the call has ended.
  virtual bool Read(v1::ShardRequest* request) = 0;
  // Read for a reader that takes chunks without a copy: a chunk comes as
  // `*chunk`, any other request in `request` (and `*chunk` is reset). The
  // RunShard stream leaves a chunk's bytes where they arrived; this one
  // moves them out of the parsed message.
  virtual bool ReadChunked(v1::ShardRequest* request,
                           std::optional<ReceivedChunk>* chunk) {
    return ReadTakingChunk(this, request, chunk);
  }
  // False if the coordinator is gone.
  virtual bool Write(const v1::ShardResponse& response) = 0;
  // Write of the call's last response: it may be held back and leave with
  // the call's status, so nothing may be read or written after it.
  virtual bool WriteLast(const v1::ShardResponse& response) {
    return Write(response);
  }
  // Write (or, if `last`, WriteLast) of a ShardResponse holding `chunk`.
  // The RunShard stream sends the chunk's bytes without copying them, and
  // keeps its owner until they are sent; this one copies them.
  virtual bool WriteChunk(const LentChunk& chunk, bool last) {
    return WriteChunkCopy<v1::ShardResponse>(this, chunk, last);
  }
  // True once the coordinator cancelled the call (it aborts the job, or the
  // call's deadline passed).
  virtual bool cancelled() const = 0;
};

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_SHARD_STREAM_H_
