#include "server/job_stream.h"

#include <utility>

#include "absl/hash/hash.h"
#include "core/digest.h"
#include "core/status_util.h"
#include "wire/chunking.h"
#include "wire/tail_writer.h"

namespace shardmap {

uint64_t ChunkHash(uint64_t hash, const v1::ArrayChunk& chunk) {
  ReceivedChunk view;  // the message keeps the bytes
  view.index = chunk.index();
  view.offset = chunk.offset();
  view.pieces.emplace_back(chunk.data());
  return ChunkHash(hash, view);
}

uint64_t ChunkHash(uint64_t hash, const ReceivedChunk& chunk) {
  // Over the bytes as one run, however they are cut into pieces.
  return DigestPieces(absl::HashOf(hash, chunk.index, chunk.offset),
                      chunk.pieces);
}

absl::Status ReadArgumentChunks(
    JobStream* stream, uint64_t* data_hash,
    const std::function<absl::Status(const ReceivedChunk&)>& accept) {
  v1::RunJobRequest request;
  std::optional<ReceivedChunk> chunk;
  while (stream->ReadChunked(&request, &chunk)) {
    if (!chunk.has_value()) {
      return absl::InvalidArgumentError("a RunJob stream carries one JobSpec");
    }
    if (data_hash != nullptr) *data_hash = ChunkHash(*data_hash, *chunk);
    if (accept) SHARD_RETURN_IF_ERROR(accept(*chunk));
  }
  return absl::OkStatus();
}

ResultWriter::ResultWriter(JobStream* stream)
    : out_(ChunkTailWriter<v1::RunJobResponse>(stream)) {}

bool ResultWriter::Result(const v1::JobResult& result) {
  v1::RunJobResponse response;
  *response.mutable_result() = result;
  return out_.Push(std::move(response));
}

bool ResultWriter::Chunk(LentChunk&& chunk) {
  return out_.Push(std::move(chunk));
}

bool ResultWriter::Output(uint32_t index,
                          std::shared_ptr<const Tensor> output) {
  const uint8_t* data = output->data();
  const size_t size = output->num_bytes();
  return LendBytesChunks(
      index, data, size, std::move(output),
      [this](LentChunk&& chunk) { return Chunk(std::move(chunk)); });
}

bool ResultWriter::Close() { return out_.Close(); }

absl::Status ResultWriter::Answer(
    const v1::JobResult& result,
    const std::vector<std::shared_ptr<const Tensor>>& outs,
    bool inline_chunks) {
  const absl::Status gone = absl::CancelledError("client went away");
  size_t returned_bytes = 0;
  for (const auto& o : outs) {
    if (o != nullptr) returned_bytes += o->num_bytes();
  }
  if (inline_chunks && returned_bytes <= kInlineChunkBytes) {
    v1::JobResult whole = result;
    for (size_t i = 0; i < outs.size(); ++i) {
      if (outs[i] == nullptr) continue;
      AppendTensorChunks(static_cast<uint32_t>(i), *outs[i],
                         whole.mutable_chunks());
    }
    if (!Result(whole) || !Close()) return gone;
    return absl::OkStatus();
  }
  if (!Result(result)) return gone;
  for (size_t i = 0; i < outs.size(); ++i) {
    if (outs[i] == nullptr) continue;  // stored, not returned
    if (!Output(static_cast<uint32_t>(i), outs[i])) return gone;
  }
  if (!Close()) return gone;
  return absl::OkStatus();
}

}  // namespace shardmap
