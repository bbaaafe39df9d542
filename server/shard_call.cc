#include "server/shard_call.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/block_math.h"
#include "core/status_util.h"
#include "server/donation.h"
#include "server/replication_check.h"
#include "wire/chunk_stream.h"
#include "wire/chunking.h"
#include "wire/proto_convert.h"

namespace shardmap {
namespace {

// A message of a device's request: a whole one, or a chunk that may lend
// its bytes (ShardChannel::WriteChunk).
using ShardOutgoing = ChunkOr<v1::ShardRequest>;

// Ends a stream we no longer trust; our own error is the one to report.
absl::Status Abandon(ShardChannel& ch, absl::Status why) {
  ch.Cancel();
  static_cast<void>(ch.Finish());
  return why;
}

v1::ResidentSource SourceOf(const ResidentArray& a,
                            const PartitionSpec& job_spec) {
  v1::ResidentSource src;
  src.set_name(a.name);
  src.set_version(a.version);
  *src.mutable_header() = HeaderToProto(a.meta.dtype, a.meta.shape);
  *src.mutable_mesh() = MeshToProto(a.mesh);
  *src.mutable_spec() = SpecToProto(a.spec);
  for (const std::string& address : a.addresses) src.add_holders(address);
  *src.mutable_job_spec() = SpecToProto(job_spec);
  return src;
}

// Device `d`'s job header.
v1::ShardRequest JobRequest(const std::string& job_id, const JobPlan& plan,
                            int64_t d, const ShardCallContext& common) {
  v1::ShardRequest request;
  v1::ShardJob* job = request.mutable_job();
  for (const WorkerPool::Worker& w : *common.workers) {
    job->add_device_addresses(w.address);
    job->add_device_incarnations(w.incarnation);
  }
  job->set_ticket((*common.tickets)[d]);
  job->set_worker_id(TicketOwner((*common.workers)[d], common.epoch));
  job->set_collective_timeout_ms(
      absl::ToInt64Milliseconds(common.collective_timeout));
  // Workers drop late peer frames of jobs they finished by this id, so it
  // must not repeat across coordinator starts (job-0 comes again).
  job->set_job_id(absl::StrCat(job_id, "@", common.epoch));
  job->set_function(plan.function.name());
  job->set_program(plan.function.program());
  *job->mutable_mesh() = MeshToProto(plan.mesh);
  for (const std::string& a : plan.manual_axes) job->add_manual_axes(a);
  job->set_device_id(d);
  job->set_kwargs_json(plan.kwargs_json);
  for (const ArgPlan& a : plan.args) {
    *job->add_args() = HeaderToProto(a.meta.dtype, a.layout.block_shape());
  }
  for (int o = 0; o < static_cast<int>(plan.out_specs.size()); ++o) {
    job->add_send_outputs(plan.StoredAs(o).empty() &&
                          plan.IsOutputRepresentative(o, d));
    job->add_skip_output_digests(!ComparesOutput(plan, o));
  }
  for (const ArgPlan& a : plan.args) {
    v1::ResidentSource* src = job->add_resident_args();
    if (!a.resident.has_value()) continue;
    *src = SourceOf(*a.resident, a.spec);
    src->set_donate(a.donated && DonationApplies(*a.resident, *common.workers));
  }
  for (int o = 0; o < static_cast<int>(plan.resident_outputs.size()); ++o) {
    v1::ResidentTarget* t = job->add_resident_outputs();
    if (plan.StoredAs(o).empty()) continue;
    t->set_name(plan.StoredAs(o));
    t->set_version((*common.output_versions)[o]);
    *t->mutable_spec() = SpecToProto(plan.out_specs[o]);
  }
  bool has_out_specs = false;
  for (size_t i = 0; i < plan.states.size(); ++i) {
    const StatePlan& st = plan.states[i];
    v1::StateSlot* slot = job->add_states();
    slot->set_slot(st.slot);
    *slot->mutable_source() = SourceOf(st.array, st.spec);
    slot->set_write(st.write);
    slot->set_write_version((*common.state_versions)[i]);
    if (st.out_spec.has_value()) has_out_specs = true;
  }
  if (has_out_specs) {  // --state-out-spec (server/state_reshard.h)
    for (const StatePlan& st : plan.states) {
      *job->add_state_out_specs() = SpecToProto(st.stored_spec());
    }
  }
  job->set_two_phase(common.two_phase);
  job->set_inline_outputs(true);
  return request;
}

// The bytes of a device's blocks of the arguments that travel with the
// job (every device's blocks are the same size).
size_t TravellingBytes(const JobPlan& plan) {
  size_t bytes = 0;
  for (const ArgPlan& a : plan.args) {
    if (a.resident.has_value()) continue;
    bytes += NumElements(a.layout.block_shape()) * ItemSize(a.meta.dtype);
  }
  return bytes;
}

// Hands device `d`'s blocks of the arguments that travel with the job to
// `emit` as chunks, each as soon as the client's bytes it needs are in: a
// block that is contiguous in its argument lends its bytes (the chunk
// keeps the arguments alive), any other is copied out. False if `emit`
// did (the stream broke); an error if the arguments failed or did not come
// in time (ArrivingInputs::Await), or the job ended elsewhere.
absl::StatusOr<bool> SendArguments(
    const JobPlan& plan, int64_t d, const ArrivingInputs& inputs,
    absl::Time deadline, const std::function<bool(LentChunk&&)>& emit) {
  const std::shared_ptr<const void> owner = inputs.owner();
  for (size_t i = 0; i < plan.args.size(); ++i) {
    const ArgPlan& a = plan.args[i];
    if (a.resident.has_value()) continue;  // the worker fetches it
    BlockRegion region(a.layout.global_shape(), a.layout.block_shape(),
                       a.layout.BlockOrigin(d), ItemSize(a.meta.dtype));
    const uint8_t* base = inputs.arrays()[i].data();
    absl::Status arrived;
    auto ready = [&](size_t offset, size_t length) {
      arrived = inputs.Await(i, region.GlobalEnd(offset, length), deadline);
      return arrived.ok();
    };
    const bool ok =
        region.contiguous()
            ? LendBytesChunks(static_cast<uint32_t>(i), base + region.start(),
                              region.num_bytes(), owner, emit, ready)
            : SendChunks(
                  static_cast<uint32_t>(i), region.num_bytes(),
                  [&](size_t offset, size_t length, uint8_t* dst) {
                    region.CopyOut(base, offset, length, dst);
                  },
                  [&emit](v1::ArrayChunk&& chunk) {
                    return emit(LentChunk::Own(std::move(chunk)));
                  },
                  ready);
    if (!arrived.ok()) return arrived;
    if (!ok) return false;
  }
  // The last piece (held by `out`; the header itself when the chunks ride
  // inside it) lets the worker start the function, so it goes only once
  // every argument is in: the devices start together
  // and none waits in a collective for a peer whose block is still
  // arriving from the client (a wait the collective timeout bounds).
  for (size_t i = 0; i < plan.args.size(); ++i) {
    SHARD_RETURN_IF_ERROR(
        inputs.Await(i, inputs.arrays()[i].num_bytes(), deadline));
  }
  return true;
}

// Hands device `d`'s request to `out`: its header, and the chunks of its
// blocks of the arguments that travel with the job, inside the header when
// they are small and the worker takes them there (the request is then one
// message), else as messages of their own. Results as SendArguments.
absl::StatusOr<bool> SendRequest(const std::string& job_id, const JobPlan& plan,
                                 int64_t d, const ShardCallContext& context,
                                 const ArrivingInputs& inputs,
                                 TailWriter<ShardOutgoing>& out) {
  v1::ShardRequest header = JobRequest(job_id, plan, d, context);
  if ((*context.workers)[d].inline_chunks &&
      TravellingBytes(plan) <= kInlineChunkBytes) {
    v1::ShardJob* job = header.mutable_job();
    const absl::StatusOr<bool> added = SendArguments(
        plan, d, inputs, context.deadline, [job](LentChunk&& chunk) {
          *job->add_chunks() = chunk.Copy();
          return true;
        });
    if (!added.ok()) return added;
    return out.Push(std::move(header));
  }
  if (!out.Push(std::move(header))) return false;
  return SendArguments(
      plan, d, inputs, context.deadline,
      [&out](LentChunk&& chunk) { return out.Push(std::move(chunk)); });
}

// Takes the worker's ShardOutputs and reads the chunks of the outputs the
// coordinator keeps; the stream stays open.
absl::StatusOr<DeviceResult> ReceiveOutputs(const JobPlan& plan, int64_t d,
                                            const ShardCallContext& common,
                                            const v1::ShardOutputs& outputs,
                                            ShardChannel& ch) {
  DeviceResult result;
  absl::StatusOr<DeviceDigests> digests = DigestsFromProto(plan, outputs);
  if (!digests.ok()) return Abandon(ch, digests.status());
  result.digests = *std::move(digests);
  std::vector<size_t> sizes;
  std::vector<ChunkSequencer::Sink> sinks;
  for (int o = 0; o < static_cast<int>(plan.out_specs.size()); ++o) {
    auto meta = HeaderFromProto(outputs.outputs(o), absl::StrCat("output ", o));
    if (!meta.ok()) return Abandon(ch, meta.status());
    result.outputs.push_back(*meta);
    if (!plan.StoredAs(o).empty() || !plan.IsOutputRepresentative(o, d)) {
      result.blocks.emplace_back(std::nullopt);
      sizes.push_back(0);
      sinks.push_back(nullptr);
      continue;
    }
    const uint64_t returned =
        common.returned_bytes->fetch_add(meta->num_bytes()) + meta->num_bytes();
    if (plan.input_bytes() + returned > common.max_job_bytes) {
      return Abandon(
          ch, absl::ResourceExhaustedError(absl::StrCat(
                  "the job's arguments (", plan.input_bytes(),
                  " bytes) and the outputs it returns (at least ", returned,
                  " bytes) are over the coordinator's "
                  "--max-job-bytes of ",
                  common.max_job_bytes,
                  " bytes; store large outputs as resident arrays "
                  "(--out @NAME) instead")));
    }
    sizes.push_back(meta->num_bytes());
    // Straight into the whole output, or, if the block does not fit it,
    // into a block of its own for the assembly to judge.
    ChunkSequencer::Sink sink = common.outputs != nullptr
                                    ? common.outputs->SinkFor(o, d, *meta)
                                    : nullptr;
    if (sink != nullptr) {
      result.blocks.emplace_back(std::nullopt);
      sinks.push_back(std::move(sink));
      continue;
    }
    auto t = Tensor::Create(meta->dtype, meta->shape);
    if (!t.ok()) return Abandon(ch, t.status());
    result.blocks.emplace_back(*std::move(t));
    sinks.push_back(ChunkSequencer::Into(*result.blocks.back()));
  }
  // The job may stream the outputs on once every device got this far.
  if (common.outputs != nullptr) common.outputs->Announce(d, result);
  ChunkSequencer sequencer(std::move(sizes), std::move(sinks), "output");
  // Small outputs come inside ShardOutputs (ShardJob.inline_outputs).
  if (absl::Status s = sequencer.AcceptAll(outputs.chunks()); !s.ok()) {
    return Abandon(ch, s);
  }
  v1::ShardResponse response;
  std::optional<ReceivedChunk> chunk;
  while (!sequencer.done() && ch.ReadChunked(&response, &chunk)) {
    absl::Status s =
        chunk.has_value()
            ? sequencer.Accept(*chunk)
            : absl::InternalError("unexpected message after outputs");
    if (!s.ok()) return Abandon(ch, s);
  }
  if (!sequencer.done()) {
    SHARD_RETURN_IF_ERROR(ch.Finish());
    SHARD_RETURN_IF_ERROR(sequencer.Finish());
  }
  return result;
}

}  // namespace

std::string TicketOwner(const WorkerPool::Worker& w, uint64_t epoch) {
  return absl::StrCat(w.id, "@", epoch);
}

absl::StatusOr<bool> SendShardCall(const std::string& job_id,
                                   const JobPlan& plan, int64_t d,
                                   const ShardCallContext& context,
                                   const ArrivingInputs& inputs,
                                   ShardChannel& ch) {
  // The last message carries the end of the stream, except for a two-phase
  // job, whose stream stays open for the commit decision.
  auto out = ChunkTailWriter<v1::ShardRequest>(&ch, context.two_phase);
  const absl::StatusOr<bool> sent =
      SendRequest(job_id, plan, d, context, inputs, out);
  // Arguments that failed end the call with their own error, not the
  // stream's.
  if (!sent.ok()) return Abandon(ch, sent.status());
  return *sent && out.Close();
}

absl::StatusOr<DeviceResult> ReceiveShardCall(const JobPlan& plan, int64_t d,
                                              const ShardCallContext& context,
                                              bool sent, ShardChannel& ch) {
  v1::ShardResponse response;
  if (!sent || !ch.Read(&response)) {
    absl::Status s = ch.Finish();
    if (s.ok()) {
      s = absl::InternalError("worker closed the stream without outputs");
    }
    return s;
  }
  if (!response.has_outputs()) {
    return Abandon(ch, absl::InternalError(absl::StrCat(
                           "worker answered ", plan.function.name(),
                           " without ShardOutputs")));
  }
  SHARD_ASSIGN_OR_RETURN(
      DeviceResult result,
      ReceiveOutputs(plan, d, context, response.outputs(), ch));
  if (context.two_phase) return result;  // SendDecision ends the stream.
  while (ch.Read(&response)) {
  }
  SHARD_RETURN_IF_ERROR(ch.Finish());
  return result;
}

bool WriteDecision(ShardChannel& ch, bool commit) {
  v1::ShardRequest decision;
  decision.mutable_decision()->set_commit(commit);
  return ch.Write(decision) && ch.WritesDone();
}

absl::Status EndDecision(ShardChannel& ch) {
  v1::ShardResponse ignored;
  while (ch.Read(&ignored)) {
  }
  return ch.Finish();
}

absl::Status SendDecision(ShardChannel& ch, bool commit) {
  // A write that failed leaves the reason to Finish.
  static_cast<void>(WriteDecision(ch, commit));
  return EndDecision(ch);
}

}  // namespace shardmap
