#include "worker/worker_service.h"

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "core/chunking.h"
#include "core/digest.h"
#include "core/proto_convert.h"
#include "core/status_util.h"
#include "worker/communicator.h"

namespace shardmap {
namespace {

// Reads the job header and argument chunks into a ShardCall.
absl::StatusOr<ShardCall> ReceiveCall(
    grpc::ServerReaderWriter<v1::ShardResponse, v1::ShardRequest>* stream,
    uint64_t max_job_bytes, std::vector<bool>* send_outputs,
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
  for (int i = 0; i < job.args_size(); ++i) {
    SHARD_ASSIGN_OR_RETURN(
        ArrayMeta meta,
        HeaderFromProto(job.args(i), absl::StrCat("args[", i, "]")));
    total += meta.num_bytes();
    if (total > max_job_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "job ", job.job_id(), " brings more than ", max_job_bytes,
          " argument bytes to device ", job.device_id()));
    }
    SHARD_ASSIGN_OR_RETURN(Tensor t, Tensor::Create(meta.dtype, meta.shape));
    call.args.push_back(std::move(t));
  }
  ChunkSequencer sequencer = ChunkSequencer::ForTensors(call.args, "argument");
  while (stream->Read(&request)) {
    if (!request.has_chunk()) {
      return absl::InvalidArgumentError("a second ShardJob in one stream");
    }
    SHARD_RETURN_IF_ERROR(sequencer.Accept(request.chunk()));
  }
  SHARD_RETURN_IF_ERROR(sequencer.Finish());
  return call;
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
  std::vector<bool> send_outputs;
  v1::ShardJob header;
  absl::StatusOr<ShardCall> call =
      ReceiveCall(stream, options_.max_job_bytes, &send_outputs, &header);
  if (!call.ok()) return ToGrpcStatus(call.status());
  const std::string job_id = call->job_id;
  const int64_t device = call->device_id;
  const absl::Time deadline = absl::FromChrono(context->deadline());
  auto cancelled = [context] { return context->IsCancelled(); };

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
  std::unique_ptr<GrpcPeerTransport> transport;
  std::unique_ptr<Communicator> comm;
  const Mesh mesh = call->mesh;
  if (network_ != nullptr &&
      header.device_addresses_size() == mesh.num_devices()) {
    GrpcPeerTransport::Options t;
    t.job_id = job_id;
    t.device = device;
    t.addresses.assign(header.device_addresses().begin(),
                       header.device_addresses().end());
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
    transport = std::make_unique<GrpcPeerTransport>(network_, std::move(t));
    comm = std::make_unique<Communicator>(&mesh, device, transport.get(),
                                          Communicator::Options{});
  }
  absl::StatusOr<std::vector<Tensor>> outputs =
      executor_->Run(*std::move(call), comm.get());
  // The next job may start its collectives while this one streams back.
  comm.reset();
  transport.reset();
  turn.reset();
  if (!outputs.ok()) return ToGrpcStatus(outputs.status());
  if (context->IsCancelled()) {
    return grpc::Status(grpc::StatusCode::CANCELLED, "job cancelled");
  }

  v1::ShardResponse response;
  v1::ShardOutputs* described = response.mutable_outputs();
  for (const Tensor& t : *outputs) {
    *described->add_outputs() = HeaderToProto(t.dtype(), t.shape());
    described->add_digests(Digest(t));
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
  return grpc::Status::OK;
}

}  // namespace shardmap
