#include "worker/shard_job.h"

#include <spdlog/spdlog.h>

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/digest.h"
#include "core/replication.h"
#include "core/status_util.h"
#include "wire/chunk_stream.h"
#include "wire/chunking.h"
#include "wire/proto_convert.h"
#include "worker/collectives/communicator.h"
#include "worker/job_residents.h"
#include "worker/state_out_reshard.h"

namespace shardmap {
namespace {

// The digest of a block whose job spec leaves a mesh axis out (the
// coordinator compares its copies across devices), else 0.
uint64_t ReplicaDigest(const Mesh& mesh, const v1::PartitionSpec& spec,
                       const Tensor& block) {
  return ReplicatedAxes(mesh, SpecFromProto(spec)).empty() ? 0 : Digest(block);
}

// Ends a JobSequencer turn however the job ends.
class Turn {
 public:
  Turn(JobSequencer* sequencer, std::string worker_id, uint64_t ticket)
      : sequencer_(sequencer),
        worker_id_(std::move(worker_id)),
        ticket_(ticket) {}
  ~Turn() { sequencer_->Leave(worker_id_, ticket_); }
  Turn(const Turn&) = delete;
  Turn& operator=(const Turn&) = delete;

 private:
  JobSequencer* const sequencer_;
  const std::string worker_id_;
  const uint64_t ticket_;
};

// Drops a job's staged writes on every way out (after a commit there are
// none left to drop).
class StagedWrites {
 public:
  StagedWrites(ResidentStore* store, std::string job_id)
      : store_(store), job_id_(std::move(job_id)) {}
  ~StagedWrites() { store_->Abort(job_id_); }
  StagedWrites(const StagedWrites&) = delete;
  StagedWrites& operator=(const StagedWrites&) = delete;

 private:
  ResidentStore* const store_;
  const std::string job_id_;
};

}  // namespace

ShardJob::ShardJob(const Options& options, const Services& services,
                   ShardStream* stream, absl::Time deadline)
    : options_(options),
      services_(services),
      stream_(stream),
      deadline_(deadline) {}

absl::Status ShardJob::Receive() {
  absl::Status s = ReceiveCall(*stream_, options_.max_job_bytes,
                               services_.budget, &received_);
  const v1::ShardJob& header = received_.header;
  if (!s.ok() && services_.sequencer != nullptr &&
      !header.worker_id().empty()) {
    // The job will not run here: the jobs after it need not wait for it.
    services_.sequencer->Skip(header.worker_id(), header.ticket());
  }
  return s;
}

absl::Status ShardJob::CheckIncarnation() const {
  const v1::ShardJob& header = received_.header;
  const int64_t device = received_.call.device_id;
  const uint64_t mine = services_.peers->incarnation();
  if (mine == 0 || device < 0 || device >= header.device_incarnations_size() ||
      header.device_incarnations(device) == 0 ||
      header.device_incarnations(device) == mine) {
    return absl::OkStatus();
  }
  return absl::AbortedError(absl::StrCat(
      "job ", header.job_id(),
      " was planned for an earlier process at this worker's address "
      "(incarnation ",
      header.device_incarnations(device), "; this one is ", mine, ")"));
}

absl::Status ShardJob::Run() {
  const v1::ShardJob& header = received_.header;
  const std::string& job_id = header.job_id();
  const int64_t device = received_.call.device_id;
  received_.call.cancelled = [stream = stream_] { return stream->cancelled(); };
  if (MemoryBudget* budget = services_.budget; budget != nullptr) {
    // A kernel's scratch memory (the SDK's Context::Allocate).
    received_.call.reserve =
        [budget, job_id,
         device](uint64_t bytes) -> absl::StatusOr<std::shared_ptr<void>> {
      SHARD_ASSIGN_OR_RETURN(
          MemoryBudget::Reservation r,
          budget->Reserve(bytes, absl::StrCat("job ", job_id, " device ",
                                              device, "'s scratch memory")));
      return std::make_shared<MemoryBudget::Reservation>(std::move(r));
    };
  }
  // A job planned for an earlier process at this address is not ours.
  SHARD_RETURN_IF_ERROR(CheckIncarnation());
  const Mesh mesh = received_.call.mesh;
  v1::ShardResponse response;
  v1::ShardOutputs* described = response.mutable_outputs();
  std::map<std::string, Tensor> states;
  // Staged writes, and the blocks exposed for states stored in another
  // sharding (Execute), are dropped on every way out but a commit.
  StagedWrites staged(services_.store, job_id);
  MemoryBudget::Reservation reshard_memory;
  SHARD_ASSIGN_OR_RETURN(std::vector<Tensor> outputs,
                         Execute(mesh, described, &states, &reshard_memory));
  MemoryBudget::Reservation outputs_memory;
  if (services_.budget != nullptr) {
    uint64_t bytes = 0;
    for (const Tensor& t : outputs) bytes += t.num_bytes();
    SHARD_ASSIGN_OR_RETURN(outputs_memory,
                           services_.budget->Reserve(
                               bytes, absl::StrCat("job ", job_id, " device ",
                                                   device, "'s outputs")));
  }
  // Describe every output and written state before they move into the
  // store.
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& t = outputs[i];
    *described->add_outputs() = HeaderToProto(t.dtype(), t.shape());
    // Hashing costs a pass over the output: only for copies compared.
    const bool skip = static_cast<int>(i) < header.skip_output_digests_size() &&
                      header.skip_output_digests(static_cast<int>(i));
    described->add_digests(skip ? 0 : Digest(t));
  }
  SHARD_RETURN_IF_ERROR(
      StageWrites(header, mesh, device, outputs, &states, *services_.store));
  if (stream_->cancelled()) return absl::CancelledError("job cancelled");
  // The outputs' bytes may be lent to gRPC past this call: their
  // reservation goes with them, released when the last loan ends.
  auto held = std::make_shared<
      std::pair<std::vector<Tensor>, MemoryBudget::Reservation>>(
      std::move(outputs), std::move(outputs_memory));
  SHARD_RETURN_IF_ERROR(
      Send(std::move(response),
           std::shared_ptr<const std::vector<Tensor>>(held, &held->first)));
  if (!header.two_phase()) return absl::OkStatus();
  return Decide();
}

absl::StatusOr<std::vector<Tensor>> ShardJob::Execute(
    const Mesh& mesh, v1::ShardOutputs* described,
    std::map<std::string, Tensor>* states,
    MemoryBudget::Reservation* reshard_memory) {
  const v1::ShardJob& header = received_.header;
  const int64_t device = received_.call.device_id;
  // Declared in the order they are set up: they end in reverse, the turn
  // last, so the next job may start its collectives while this one
  // streams back.
  std::unique_ptr<Turn> turn;
  if (services_.sequencer != nullptr && !header.worker_id().empty()) {
    SHARD_RETURN_IF_ERROR(services_.sequencer->Enter(header.worker_id(),
                                                     header.ticket(), deadline_,
                                                     received_.call.cancelled));
    turn = std::make_unique<Turn>(services_.sequencer, header.worker_id(),
                                  header.ticket());
  }
  spdlog::debug("job {}: device {} runs {}", header.job_id(), device,
                received_.call.function);
  // The job's collectives go over its peers; the coordinator cancelling
  // the call (another device failed, or the deadline passed) ends any wait
  // in them.
  std::unique_ptr<PeerTransport> transport;
  std::unique_ptr<Communicator> comm;
  if (header.device_addresses_size() == mesh.num_devices()) {
    JobPeers::Link link;
    link.deadline = deadline_;
    link.collective_timeout =
        header.collective_timeout_ms() > 0
            ? absl::Milliseconds(header.collective_timeout_ms())
            : options_.collective_timeout;
    link.aborted = [stream = stream_] {
      return stream->cancelled() ? absl::CancelledError("the job was cancelled")
                                 : absl::OkStatus();
    };
    transport = services_.peers->Open(header, link);
  }
  if (transport != nullptr) {
    Communicator::Options comm_options;
    comm_options.manual_axes.assign(header.manual_axes().begin(),
                                    header.manual_axes().end());
    comm = std::make_unique<Communicator>(&mesh, device, transport.get(),
                                          std::move(comm_options));
  }
  // Resident arguments and states: this device's blocks, by the job's
  // specs, gathered from the workers that hold them.
  std::vector<Tensor>& args = received_.call.args;
  SHARD_RETURN_IF_ERROR(FetchResidents(header, mesh, device, *services_.peers,
                                       *services_.store, deadline_, &args,
                                       states));
  // What this device read, before the function changes its states.
  for (size_t i = 0; i < args.size(); ++i) {
    const bool resident = static_cast<int>(i) < header.resident_args_size() &&
                          !header.resident_args(i).name().empty();
    described->add_resident_arg_digests(
        resident
            ? ReplicaDigest(mesh, header.resident_args(i).job_spec(), args[i])
            : 0);
  }
  for (const v1::StateSlot& slot : header.states()) {
    described->add_read_state_digests(
        ReplicaDigest(mesh, slot.source().job_spec(), states->at(slot.slot())));
  }
  SHARD_ASSIGN_OR_RETURN(
      std::vector<Tensor> outputs,
      services_.executor->Run(std::move(received_.call), comm.get(),
                              header.states_size() > 0 ? states : nullptr));
  // The written states' digests, in the job's sharding (the coordinator
  // compares their copies by the job's specs).
  for (const v1::StateSlot& slot : header.states()) {
    auto it = states->find(slot.slot());
    described->add_state_digests(
        slot.write() && it != states->end()
            ? ReplicaDigest(mesh, slot.source().job_spec(), it->second)
            : 0);
  }
  described->set_state_out_specs_applied(header.state_out_specs_size() > 0);
  if (ReshardsStates(header)) {
    SHARD_RETURN_IF_ERROR(ReshardWrittenStates(
        header, mesh, device, *services_.peers, *services_.store,
        ReshardHooks(header, mesh, comm.get(), reshard_memory), deadline_,
        states));
  }
  return outputs;
}

StateReshardHooks ShardJob::ReshardHooks(
    const v1::ShardJob& header, const Mesh& mesh, Communicator* comm,
    MemoryBudget::Reservation* memory) const {
  StateReshardHooks hooks;
  // A psum of one number over the manual axes: every device of this one's
  // group has exposed its blocks once it returns.
  hooks.barrier = [&header, &mesh, comm]() -> absl::Status {
    if (comm == nullptr) return absl::OkStatus();  // one device
    Axes axes(header.manual_axes().begin(), header.manual_axes().end());
    if (axes.empty()) {
      for (const MeshAxis& a : mesh.axes()) axes.push_back(a.name);
    }
    SHARD_ASSIGN_OR_RETURN(Tensor one, Tensor::Create(DType::kInt32, Shape{}));
    return comm->Psum(one, axes).status();
  };
  if (MemoryBudget* budget = services_.budget; budget != nullptr) {
    hooks.reserve = [budget, memory](uint64_t bytes,
                                     const std::string& what) -> absl::Status {
      SHARD_ASSIGN_OR_RETURN(*memory, budget->Reserve(bytes, what));
      return absl::OkStatus();
    };
  }
  return hooks;
}

absl::Status ShardJob::Send(v1::ShardResponse response,
                            std::shared_ptr<const std::vector<Tensor>> lent) {
  const v1::ShardJob& header = received_.header;
  const std::vector<Tensor>& outputs = *lent;
  // The last message leaves with the call's status, except for a two-phase
  // job, which waits for the decision.
  auto out = ChunkTailWriter<v1::ShardResponse>(stream_, header.two_phase());
  const absl::Status gone = absl::CancelledError("coordinator went away");
  const std::vector<bool>& wanted = received_.send_outputs;
  // The outputs whose bytes the coordinator asked for. A stored output has
  // moved into the store (its header and digest go out in `response`); the
  // coordinator never asks for its data.
  std::vector<uint32_t> returned;
  size_t returned_bytes = 0;
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (i < wanted.size() && !wanted[i]) continue;
    const bool stored = static_cast<int>(i) < header.resident_outputs_size() &&
                        !header.resident_outputs(i).name().empty();
    if (stored) continue;
    returned.push_back(static_cast<uint32_t>(i));
    returned_bytes += outputs[i].num_bytes();
  }
  // Small outputs ride in the ShardOutputs message: the answer is then one
  // message (which, but for a two-phase job's, leaves with the status).
  if (header.inline_outputs() && returned_bytes <= kInlineChunkBytes) {
    for (uint32_t i : returned) {
      AppendTensorChunks(i, outputs[i],
                         response.mutable_outputs()->mutable_chunks());
    }
    returned.clear();
  }
  if (!out.Push(std::move(response))) return gone;
  for (uint32_t i : returned) {
    const bool ok = LendBytesChunks(
        i, outputs[i].data(), outputs[i].num_bytes(), lent,
        [&out](LentChunk&& chunk) { return out.Push(std::move(chunk)); });
    if (!ok) return gone;
  }
  if (!out.Close()) return gone;
  return absl::OkStatus();
}

absl::Status ShardJob::Decide() {
  // Hold the writes until the coordinator has every device's outputs and
  // decides; anything but a commit (a broken stream, a cancel, the
  // deadline) drops them.
  v1::ShardRequest decision;
  if (!stream_->Read(&decision) || !decision.has_decision() ||
      !decision.decision().commit()) {
    return absl::OkStatus();
  }
  // A write that cannot be persisted is not stored: the coordinator sees
  // this error and does not publish the job's versions.
  const int64_t device = received_.header.device_id();
  if (absl::Status s = services_.store->Commit(job_id()); !s.ok()) {
    spdlog::error("job {}: device {} cannot keep its writes: {}", job_id(),
                  device, std::string(s.message()));
    return Annotate(
        s, absl::StrCat("device ", device, " cannot keep the job's writes"));
  }
  return absl::OkStatus();
}

}  // namespace shardmap
