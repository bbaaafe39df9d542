#include "worker/worker_service.h"

#include <spdlog/spdlog.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/block_math.h"
#include "core/digest.h"
#include "core/npy.h"
#include "core/replication.h"
#include "core/status_util.h"
#include "rpc/grpc_status.h"
#include "rpc/trace_context.h"
#include "wire/chunking.h"
#include "wire/proto_convert.h"
#include "worker/collectives/communicator.h"
#include "worker/routed_peer_transport.h"
#include "worker/store/block_fetch.h"
#include "worker/store/checkpoint_blocks.h"

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

// Reads the job header and argument chunks into a ShardCall.
absl::StatusOr<ShardCall> ReceiveCall(
    grpc::ServerReaderWriter<v1::ShardResponse, v1::ShardRequest>* stream,
    uint64_t max_job_bytes, MemoryBudget* budget,
    MemoryBudget::Reservation* reserved, std::vector<bool>* send_outputs,
    v1::ShardJob* header) {
  v1::ShardRequest request;
  if (!stream->Read(&request) || !request.has_job()) {
    return absl::InvalidArgumentError(
        "RunShard stream must start with a ShardJob");
  }
  const v1::ShardJob& job = request.job();
  *header = job;
  header->clear_args();
  ShardCall call;
  call.job_id = job.job_id();
  call.function = job.function();
  SHARD_ASSIGN_OR_RETURN(call.mesh, MeshFromProto(job.mesh()));
  call.device_id = job.device_id();
  call.kwargs_json = job.kwargs_json();
  send_outputs->assign(job.send_outputs().begin(), job.send_outputs().end());
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
    // Resident arguments and states are fetched at the job's turn: their
    // blocks count too, before anything is allocated.
    uint64_t fetched = 0;
    for (const v1::ResidentSource& r : job.resident_args()) {
      if (r.name().empty()) continue;
      SHARD_ASSIGN_OR_RETURN(uint64_t bytes, ResidentBlockBytes(r, call.mesh));
      fetched += bytes;
    }
    for (const v1::StateSlot& s : job.states()) {
      SHARD_ASSIGN_OR_RETURN(uint64_t bytes,
                             ResidentBlockBytes(s.source(), call.mesh));
      fetched += bytes;
    }
    SHARD_ASSIGN_OR_RETURN(
        *reserved,
        budget->Reserve(
            total + fetched,
            absl::StrCat("job ", job.job_id(), " device ", job.device_id(),
                         "'s arguments",
                         fetched > 0 ? " and resident blocks" : "")));
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
  // Stop at the last byte rather than at the coordinator's half-close: a
  // two-phase job's stream stays open for the commit decision.
  while (!sequencer.done() && stream->Read(&request)) {
    if (!request.has_chunk()) {
      return absl::InvalidArgumentError("a second ShardJob in one stream");
    }
    SHARD_RETURN_IF_ERROR(sequencer.Accept(request.chunk()));
  }
  SHARD_RETURN_IF_ERROR(sequencer.Finish());
  return call;
}

// The digest of a block whose job spec leaves a mesh axis out (the
// coordinator compares its copies across devices), else 0.
uint64_t ReplicaDigest(const Mesh& mesh, const v1::PartitionSpec& spec,
                       const Tensor& block) {
  return ReplicatedAxes(mesh, SpecFromProto(spec)).empty() ? 0 : Digest(block);
}

}  // namespace

// Ends a JobSequencer turn however the job ends.
class Turn {
 public:
  Turn(JobSequencer* sequencer, std::string worker_id, uint64_t ticket)
      : sequencer_(sequencer),
        worker_id_(std::move(worker_id)),
        ticket_(ticket) {}
  ~Turn() { sequencer_->Leave(worker_id_, ticket_); }

 private:
  JobSequencer* const sequencer_;
  const std::string worker_id_;
  const uint64_t ticket_;
};

grpc::Status WorkerService::RunShard(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<v1::ShardResponse, v1::ShardRequest>* stream) {
  std::unique_ptr<DrainGate::Pass> pass;
  if (options_.gate != nullptr) {
    auto entered = options_.gate->Enter(context);
    if (!entered.ok()) return ToGrpcStatus(entered.status());
    pass = *std::move(entered);
  }
  std::vector<bool> send_outputs;
  v1::ShardJob header;
  MemoryBudget::Reservation arguments_memory, outputs_memory;
  absl::StatusOr<ShardCall> call =
      ReceiveCall(stream, options_.max_job_bytes, options_.budget,
                  &arguments_memory, &send_outputs, &header);
  if (!call.ok()) {
    // The job will not run here: the jobs after it need not wait for it.
    if (sequencer_ != nullptr && !header.worker_id().empty()) {
      sequencer_->Skip(header.worker_id(), header.ticket());
    }
    return ToGrpcStatus(call.status());
  }
  const std::string job_id = call->job_id;
  const int64_t device = call->device_id;
  const Traceparent span = ServerSpan(*context);
  ScopedLogContext log_context({job_id, span.trace_id, span.span_id});
  const absl::Time deadline = absl::FromChrono(context->deadline());
  auto cancelled = [context] { return context->IsCancelled(); };
  call->cancelled = cancelled;

  // A job planned for an earlier process at this address is not ours.
  if (network_ != nullptr && device >= 0 &&
      device < header.device_incarnations_size() &&
      header.device_incarnations(device) != 0 &&
      header.device_incarnations(device) != network_->incarnation()) {
    return ToGrpcStatus(absl::AbortedError(
        absl::StrCat("job ", job_id,
                     " was planned for an earlier process at this "
                     "worker's address (incarnation ",
                     header.device_incarnations(device), "; this one is ",
                     network_->incarnation(), ")")));
  }
  std::unique_ptr<Turn> turn;
  if (sequencer_ != nullptr && !header.worker_id().empty()) {
    absl::Status s = sequencer_->Enter(header.worker_id(), header.ticket(),
                                       deadline, cancelled);
    if (!s.ok()) return ToGrpcStatus(s);
    turn =
        std::make_unique<Turn>(sequencer_, header.worker_id(), header.ticket());
  }
  spdlog::debug("job {}: device {} runs {}", job_id, device, call->function);

  // The job's collectives go over the peer transport; the coordinator
  // cancelling the call (another device failed, or the deadline passed)
  // ends any wait in them.
  std::unique_ptr<RoutedPeerTransport> transport;
  std::unique_ptr<Communicator> comm;
  const Mesh mesh = call->mesh;
  if (network_ != nullptr &&
      header.device_addresses_size() == mesh.num_devices()) {
    GrpcPeerTransport::Options t;
    t.job_id = job_id;
    t.device = device;
    t.addresses.assign(header.device_addresses().begin(),
                       header.device_addresses().end());
    t.incarnations.assign(header.device_incarnations().begin(),
                          header.device_incarnations().end());
    t.deadline = deadline;
    t.collective_timeout =
        header.collective_timeout_ms() > 0
            ? absl::Milliseconds(header.collective_timeout_ms())
            : options_.collective_timeout;
    t.aborted = [context]() {
      return context->IsCancelled()
                 ? absl::CancelledError("the job was cancelled")
                 : absl::OkStatus();
    };
    transport = std::make_unique<RoutedPeerTransport>(network_, options_.shm,
                                                      std::move(t));
    comm = std::make_unique<Communicator>(&mesh, device, transport.get(),
                                          Communicator::Options{});
  }
  // Resident arguments and states: this device's blocks, by the job's
  // specs, gathered from the workers that hold them.
  std::map<std::string, Tensor> states;
  if (absl::Status s =
          FetchResidents(header, mesh, device, deadline, &call->args, &states);
      !s.ok()) {
    return ToGrpcStatus(s);
  }
  // What this device read, before the function changes its states.
  v1::ShardResponse response;
  v1::ShardOutputs* described = response.mutable_outputs();
  for (size_t i = 0; i < call->args.size(); ++i) {
    const bool resident = static_cast<int>(i) < header.resident_args_size() &&
                          !header.resident_args(i).name().empty();
    described->add_resident_arg_digests(
        resident ? ReplicaDigest(mesh, header.resident_args(i).job_spec(),
                                 call->args[i])
                 : 0);
  }
  for (const v1::StateSlot& slot : header.states()) {
    described->add_read_state_digests(
        ReplicaDigest(mesh, slot.source().job_spec(), states.at(slot.slot())));
  }
  absl::StatusOr<std::vector<Tensor>> outputs =
      executor_->Run(*std::move(call), comm.get(),
                     header.states_size() > 0 ? &states : nullptr);
  // The next job may start its collectives while this one streams back.
  comm.reset();
  transport.reset();
  turn.reset();
  if (!outputs.ok()) return ToGrpcStatus(outputs.status());
  if (options_.budget != nullptr) {
    uint64_t bytes = 0;
    for (const Tensor& t : *outputs) bytes += t.num_bytes();
    auto reserved = options_.budget->Reserve(
        bytes, absl::StrCat("job ", job_id, " device ", device, "'s outputs"));
    if (!reserved.ok()) return ToGrpcStatus(reserved.status());
    outputs_memory = *std::move(reserved);
  }
  // Describe every output and written state before they move into the
  // store.
  for (const Tensor& t : *outputs) {
    *described->add_outputs() = HeaderToProto(t.dtype(), t.shape());
    described->add_digests(Digest(t));
  }
  for (const v1::StateSlot& slot : header.states()) {
    auto it = states.find(slot.slot());
    described->add_state_digests(
        slot.write() && it != states.end()
            ? ReplicaDigest(mesh, slot.source().job_spec(), it->second)
            : 0);
  }
  // Staged writes are dropped on every way out but a commit.
  struct DropStaged {
    ResidentStore* store;
    const std::string& job_id;
    ~DropStaged() { store->Abort(job_id); }
  } drop_staged{store_, job_id};
  if (absl::Status s = StageWrites(header, mesh, device, *outputs, &states);
      !s.ok()) {
    return ToGrpcStatus(s);
  }
  if (context->IsCancelled()) {
    return grpc::Status(grpc::StatusCode::CANCELLED, "job cancelled");
  }
  if (!stream->Write(response)) {
    return grpc::Status(grpc::StatusCode::CANCELLED, "coordinator went away");
  }
  for (size_t i = 0; i < outputs->size(); ++i) {
    if (i < send_outputs.size() && !send_outputs[i]) continue;
    const bool ok = SendTensorChunks(static_cast<uint32_t>(i), (*outputs)[i],
                                     [&](v1::ArrayChunk&& chunk) {
                                       v1::ShardResponse r;
                                       *r.mutable_chunk() = std::move(chunk);
                                       return stream->Write(r);
                                     });
    if (!ok) {
      return grpc::Status(grpc::StatusCode::CANCELLED, "coordinator went away");
    }
  }
  if (header.two_phase()) {
    // Hold the writes until the coordinator has every device's outputs
    // and decides; anything but a commit (a broken stream, a cancel, the
    // deadline) drops them.
    v1::ShardRequest decision;
    if (stream->Read(&decision) && decision.has_decision() &&
        decision.decision().commit()) {
      // A write that cannot be persisted is not stored: the coordinator
      // sees this error and does not publish the job's versions.
      if (absl::Status s = store_->Commit(job_id); !s.ok()) {
        spdlog::error("job {}: device {} cannot keep its writes: {}", job_id,
                      device, std::string(s.message()));
        return ToGrpcStatus(Annotate(
            s,
            absl::StrCat("device ", device, " cannot keep the job's writes")));
      }
    }
  }
  return grpc::Status::OK;
}

absl::Status WorkerService::FetchResidents(
    const v1::ShardJob& header, const Mesh& mesh, int64_t device,
    absl::Time deadline, std::vector<Tensor>* args,
    std::map<std::string, Tensor>* states) {
  const std::string me = network_ != nullptr ? network_->my_address() : "";
  auto read = [this](const std::string& address,
                     const v1::ReadBlockRequest& request, absl::Time d) {
    return reader_.Read(address, request, d);
  };
  for (int i = 0; i < header.resident_args_size(); ++i) {
    const v1::ResidentSource& src = header.resident_args(i);
    if (src.name().empty()) continue;
    if (i >= static_cast<int>(args->size())) {
      return absl::InvalidArgumentError("resident argument past the arguments");
    }
    SHARD_ASSIGN_OR_RETURN(
        (*args)[i],
        FetchResidentBlock(src, mesh, device, me, *store_, read, deadline));
  }
  for (const v1::StateSlot& slot : header.states()) {
    SHARD_ASSIGN_OR_RETURN(
        Tensor t, FetchResidentBlock(slot.source(), mesh, device, me, *store_,
                                     read, deadline));
    (*states)[slot.slot()] = std::move(t);
  }
  return absl::OkStatus();
}

absl::Status WorkerService::StageWrites(const v1::ShardJob& header,
                                        const Mesh& mesh, int64_t device,
                                        std::vector<Tensor>& outputs,
                                        std::map<std::string, Tensor>* states) {
  auto stage = [&](const std::string& name, uint64_t version,
                   const PartitionSpec& spec, Tensor block) -> absl::Status {
    const PartitionSpec s = spec.unsplit() ? PartitionSpec() : spec;
    SHARD_ASSIGN_OR_RETURN(
        BlockLayout layout,
        BlockLayout::FromBlockShape(mesh, s, block.shape(), "its spec", name));
    ResidentStore::Block b;
    b.version = version;
    b.device = device;
    b.box = Box{layout.BlockOrigin(device), block.shape()};
    b.layout = ResidentStore::ArrayLayout{
        ArrayMeta{block.dtype(), layout.global_shape()}, mesh, s};
    b.data = std::make_shared<const Tensor>(std::move(block));
    store_->Stage(header.job_id(), name, std::move(b));
    return absl::OkStatus();
  };
  for (int o = 0; o < header.resident_outputs_size(); ++o) {
    const v1::ResidentTarget& target = header.resident_outputs(o);
    if (target.name().empty()) continue;
    if (o >= static_cast<int>(outputs.size())) {
      return absl::InvalidArgumentError("resident output past the outputs");
    }
    SHARD_RETURN_IF_ERROR(stage(target.name(), target.version(),
                                SpecFromProto(target.spec()),
                                std::move(outputs[o])));
  }
  for (const v1::StateSlot& slot : header.states()) {
    if (!slot.write()) continue;
    auto it = states->find(slot.slot());
    if (it == states->end()) continue;
    const v1::ResidentSource& src = slot.source();
    SHARD_ASSIGN_OR_RETURN(ArrayMeta meta,
                           HeaderFromProto(src.header(), src.name()));
    Tensor& value = it->second;
    SHARD_ASSIGN_OR_RETURN(
        BlockLayout layout,
        BlockLayout::Create(mesh,
                            SpecFromProto(src.job_spec()).unsplit()
                                ? PartitionSpec()
                                : SpecFromProto(src.job_spec()),
                            meta.shape, "the state's spec", src.name()));
    if (value.dtype() != meta.dtype || value.shape() != layout.block_shape()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "state '", slot.slot(), "' (", src.name(), ") must keep its block ",
          ShapeString(meta.dtype, layout.block_shape()),
          " but the function "
          "left ",
          ShapeString(value.dtype(), value.shape())));
    }
    SHARD_RETURN_IF_ERROR(stage(src.name(), slot.write_version(),
                                SpecFromProto(src.job_spec()),
                                std::move(value)));
  }
  return absl::OkStatus();
}

grpc::Status WorkerService::ReadBlock(
    grpc::ServerContext* context, const v1::ReadBlockRequest* request,
    grpc::ServerWriter<v1::ArrayChunk>* writer) {
  absl::StatusOr<std::string> bytes = ReadLocalBox(*store_, *request);
  if (!bytes.ok()) return ToGrpcStatus(bytes.status());
  const bool ok = SendChunks(
      0, bytes->size(),
      [&](size_t offset, size_t length, uint8_t* dst) {
        std::memcpy(dst, bytes->data() + offset, length);
      },
      [&](v1::ArrayChunk&& chunk) { return writer->Write(chunk); });
  if (!ok) return grpc::Status(grpc::StatusCode::CANCELLED, "reader went away");
  return grpc::Status::OK;
}

grpc::Status WorkerService::DropArray(grpc::ServerContext* context,
                                      const v1::DropArrayRequest* request,
                                      v1::DropArrayResponse* response) {
  return ToGrpcStatus(store_->Drop(request->name()));
}

grpc::Status WorkerService::SkipTickets(grpc::ServerContext* context,
                                        const v1::SkipTicketsRequest* request,
                                        v1::SkipTicketsResponse* response) {
  if (sequencer_ == nullptr) return grpc::Status::OK;
  for (uint64_t ticket : request->tickets()) {
    sequencer_->Skip(request->worker_id(), ticket);
  }
  return grpc::Status::OK;
}

grpc::Status WorkerService::SaveBlock(grpc::ServerContext* context,
                                      const v1::SaveBlockRequest* request,
                                      v1::SaveBlockResponse* response) {
  absl::StatusOr<uint64_t> digest = SaveCheckpointBlock(*store_, *request);
  if (!digest.ok()) return ToGrpcStatus(digest.status());
  response->set_digest(*digest);
  return grpc::Status::OK;
}

grpc::Status WorkerService::LoadBlock(grpc::ServerContext* context,
                                      const v1::LoadBlockRequest* request,
                                      v1::LoadBlockResponse* response) {
  return ToGrpcStatus(LoadCheckpointBlock(*store_, *request));
}

}  // namespace shardmap
