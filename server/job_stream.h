// The client's side of one job, without gRPC: the RunJob stream (a JobSpec,
// then the argument chunks in; the JobResult, then the returned outputs as
// chunks out) as JobService sees it, and the reading and writing of a job's
// arrays over it. coordinator_service adapts the gRPC stream to it; unit
// tests use a fake.
#ifndef SHARDMAP_SERVER_JOB_STREAM_H_
#define SHARDMAP_SERVER_JOB_STREAM_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "core/tensor.h"
#include "server/planner.h"
#include "shardmap/v1/coordinator.pb.h"
#include "wire/chunk_stream.h"

namespace shardmap {

// Not thread-safe, except cancelled(), which any thread may call.
class JobStream {
 public:
  virtual ~JobStream() = default;
  // False at the end of the client's messages, or when the call broke.
  virtual bool Read(v1::RunJobRequest* request) = 0;
  // Read for a reader that takes chunks without a copy: a chunk comes as
  // `*chunk`, any other message in `request` (and `*chunk` is reset). The
  // gRPC stream leaves a chunk's bytes where they arrived; this one moves
  // them out of the parsed message.
  virtual bool ReadChunked(v1::RunJobRequest* request,
                           std::optional<ReceivedChunk>* chunk) {
    return ReadTakingChunk(this, request, chunk);
  }
  // False when the call broke (the client went away).
  virtual bool Write(const v1::RunJobResponse& response) = 0;
  // Write of the call's last response: it may be held back and leave with
  // the call's status, so nothing may be read or written after it.
  virtual bool WriteLast(const v1::RunJobResponse& response) {
    return Write(response);
  }
  // Write (or, if `last`, WriteLast) of a RunJobResponse holding `chunk`.
  // The gRPC stream sends the chunk's bytes without copying them, and
  // keeps its owner until they are sent; this one copies them.
  virtual bool WriteChunk(const LentChunk& chunk, bool last) {
    return WriteChunkCopy<v1::RunJobResponse>(this, chunk, last);
  }
  // True once the client cancelled or went away, or the call was cancelled
  // for it (its deadline passed).
  virtual bool cancelled() const = 0;
};

// Folds one argument chunk into the hash of a job's data: a retry under
// the same call_id must send the same data. The same for a chunk in any
// number of pieces.
uint64_t ChunkHash(uint64_t hash, const v1::ArrayChunk& chunk);
uint64_t ChunkHash(uint64_t hash, const ReceivedChunk& chunk);

// Reads the argument chunks that follow a RunJob's JobSpec, to the end of
// the stream: each is folded into `data_hash` (if not null) and handed to
// `accept` (if not null), whose error ends the reading. INVALID_ARGUMENT
// for a second JobSpec.
absl::Status ReadArgumentChunks(
    JobStream* stream, uint64_t* data_hash,
    const std::function<absl::Status(const ReceivedChunk&)>& accept);

// Writes a job's answer to its client: the result, then the chunks of its
// returned outputs, output by output, each in order. The last message is
// held back until Close, so that it leaves with the call's status: a job
// that fails after its outputs began to stream never hands its client a
// whole answer. Every call returns false once the client went away.
class ResultWriter {
 public:
  explicit ResultWriter(JobStream* stream);

  bool Result(const v1::JobResult& result);
  // The next chunk of a returned output.
  bool Chunk(LentChunk&& chunk);
  // All of output `index`, as chunks lent from `output`.
  bool Output(uint32_t index, std::shared_ptr<const Tensor> output);
  // Writes the held message with WriteLast: nothing may be written after.
  bool Close();

  // The whole answer: `result`, then the returned outputs (by output; null:
  // stored, not returned) as chunks, then Close. With `inline_chunks`
  // (JobSpec.inline_outputs), outputs of at most kInlineChunkBytes in all go
  // inside the result instead (JobResult.chunks). CANCELLED if the client
  // went away.
  absl::Status Answer(const v1::JobResult& result,
                      const std::vector<std::shared_ptr<const Tensor>>& outs,
                      bool inline_chunks);

 private:
  // A whole message, or a chunk sent by reference.
  TailWriter<ChunkOr<v1::RunJobResponse>> out_;
};

}  // namespace shardmap

#endif  // SHARDMAP_SERVER_JOB_STREAM_H_
