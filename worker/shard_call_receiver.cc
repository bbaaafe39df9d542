#include "worker/shard_call_receiver.h"

#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/block_math.h"
#include "core/status_util.h"
#include "wire/chunking.h"
#include "wire/proto_convert.h"

namespace shardmap {
namespace {

// The bytes of this device's block of resident array `r` in the job's
// sharding over `job_mesh`: what fetching (or resharding) it allocates.
absl::StatusOr<uint64_t> ResidentBlockBytes(const v1::ResidentSource& r,
                                            const Mesh& job_mesh) {
  SHARD_ASSIGN_OR_RETURN(ArrayMeta meta, HeaderFromProto(r.header(), r.name()));
  SHARD_ASSIGN_OR_RETURN(
      BlockLayout layout,
      BlockLayout::Create(job_mesh, SpecFromProto(r.job_spec()), meta.shape,
                          "the job's spec", absl::StrCat("'", r.name(), "'")));
  return static_cast<uint64_t>(NumElements(layout.block_shape())) *
         ItemSize(meta.dtype);
}

// Resident arguments and states are fetched at the job's turn: their
// blocks count in the budget too, before anything is allocated.
absl::StatusOr<MemoryBudget::Reservation> ReserveArguments(
    const v1::ShardJob& job, const Mesh& mesh, uint64_t sent,
    MemoryBudget& budget) {
  uint64_t fetched = 0;
  for (const v1::ResidentSource& r : job.resident_args()) {
    if (r.name().empty()) continue;
    SHARD_ASSIGN_OR_RETURN(uint64_t bytes, ResidentBlockBytes(r, mesh));
    fetched += bytes;
  }
  for (const v1::StateSlot& s : job.states()) {
    SHARD_ASSIGN_OR_RETURN(uint64_t bytes,
                           ResidentBlockBytes(s.source(), mesh));
    fetched += bytes;
  }
  return budget.Reserve(
      sent + fetched,
      absl::StrCat("job ", job.job_id(), " device ", job.device_id(),
                   "'s arguments", fetched > 0 ? " and resident blocks" : ""));
}

}  // namespace

absl::Status ReceiveCall(ShardStream& stream, uint64_t max_job_bytes,
                         MemoryBudget* budget, ReceivedCall* received) {
  v1::ShardRequest request;
  if (!stream.Read(&request) || !request.has_job()) {
    return absl::InvalidArgumentError(
        "RunShard stream must start with a ShardJob");
  }
  // Small arguments come inside the ShardJob (RegisterRequest.inline_chunks).
  google::protobuf::RepeatedPtrField<v1::ArrayChunk> inline_chunks;
  inline_chunks.Swap(request.mutable_job()->mutable_chunks());
  const v1::ShardJob& job = request.job();
  received->header = job;
  received->header.clear_args();
  ShardCall& call = received->call;
  call.job_id = job.job_id();
  call.function = job.function();
  call.program = job.program();
  SHARD_ASSIGN_OR_RETURN(call.mesh, MeshFromProto(job.mesh()));
  call.manual_axes.assign(job.manual_axes().begin(), job.manual_axes().end());
  call.device_id = job.device_id();
  call.kwargs_json = job.kwargs_json();
  received->send_outputs.assign(job.send_outputs().begin(),
                                job.send_outputs().end());
  uint64_t total = 0;
  std::vector<std::optional<ArrayMeta>> metas;  // none: a resident argument
  for (int i = 0; i < job.args_size(); ++i) {
    if (i < job.resident_args_size() && !job.resident_args(i).name().empty()) {
      metas.emplace_back();  // fetched from its holders at the job's turn
      continue;
    }
    SHARD_ASSIGN_OR_RETURN(
        ArrayMeta meta,
        HeaderFromProto(job.args(i), absl::StrCat("args[", i, "]")));
    total += meta.num_bytes();
    if (total > max_job_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "job ", job.job_id(), " brings more than ", max_job_bytes,
          " argument bytes to device ", job.device_id()));
    }
    metas.push_back(meta);
  }
  if (budget != nullptr) {
    SHARD_ASSIGN_OR_RETURN(received->arguments_memory,
                           ReserveArguments(job, call.mesh, total, *budget));
  }
  for (const std::optional<ArrayMeta>& meta : metas) {
    if (!meta.has_value()) {
      call.args.emplace_back(DType::kFloat32, Shape{0});
      continue;
    }
    SHARD_ASSIGN_OR_RETURN(Tensor t, Tensor::Create(meta->dtype, meta->shape));
    call.args.push_back(std::move(t));
  }
  ChunkSequencer sequencer = ChunkSequencer::ForTensors(call.args, "argument");
  SHARD_RETURN_IF_ERROR(sequencer.AcceptAll(inline_chunks));
  // Stop at the last byte rather than at the coordinator's half-close: a
  // two-phase job's stream stays open for the commit decision.
  std::optional<ReceivedChunk> chunk;
  while (!sequencer.done() && stream.ReadChunked(&request, &chunk)) {
    if (!chunk.has_value()) {
      return absl::InvalidArgumentError("a second ShardJob in one stream");
    }
    SHARD_RETURN_IF_ERROR(sequencer.Accept(*chunk));
  }
  return sequencer.Finish();
}

}  // namespace shardmap
