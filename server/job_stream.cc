#include "server/job_stream.h"

#include <utility>

#include "absl/hash/hash.h"
#include "core/status_util.h"
#include "wire/chunking.h"
#include "wire/tail_writer.h"

namespace shardmap {

uint64_t ChunkHash(uint64_t hash, const v1::ArrayChunk& chunk) {
  return absl::HashOf(hash, chunk.index(), chunk.offset(),
                      absl::string_view(chunk.data()));
}

absl::Status SendResult(const v1::JobResult& result,
                        const std::vector<std::shared_ptr<const Tensor>>& outs,
                        JobStream* stream) {
  // The last message leaves with the call's status.
  TailWriter<v1::RunJobResponse> out(
      [stream](const v1::RunJobResponse& r, bool last) {
        return last ? stream->WriteLast(r) : stream->Write(r);
      });
  const absl::Status gone = absl::CancelledError("client went away");
  v1::RunJobResponse response;
  *response.mutable_result() = result;
  if (!out.Push(std::move(response))) return gone;
  for (size_t i = 0; i < outs.size(); ++i) {
    if (outs[i] == nullptr) continue;  // stored, not returned
    const bool ok = SendTensorChunks(static_cast<uint32_t>(i), *outs[i],
                                     [&](v1::ArrayChunk&& chunk) {
                                       v1::RunJobResponse r;
                                       *r.mutable_chunk() = std::move(chunk);
                                       return out.Push(std::move(r));
                                     });
    if (!ok) return gone;
  }
  if (!out.Close()) return gone;
  return absl::OkStatus();
}

}  // namespace shardmap
