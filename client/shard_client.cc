#include "client/shard_client.h"

#include <grpcpp/grpcpp.h>

#include <thread>

#include "absl/strings/str_cat.h"
#include "core/channel.h"
#include "core/chunking.h"
#include "core/proto_convert.h"
#include "core/status_util.h"

namespace shardmap {

ShardClient::ShardClient(const Options& options) : options_(options) {
  stub_ = v1::Coordinator::NewStub(MakeChannel(options_.address));
}

absl::StatusOr<std::unique_ptr<ShardClient>> ShardClient::Create(
    const Options& options) {
  if (options.address.empty()) {
    return absl::InvalidArgumentError("coordinator address is empty");
  }
  return std::unique_ptr<ShardClient>(new ShardClient(options));
}

absl::StatusOr<JobResult> ShardClient::Run(const JobRequest& job) const {
  v1::RunJobRequest request;
  v1::JobSpec* spec = request.mutable_spec();
  spec->set_function(job.function);
  *spec->mutable_mesh() = MeshToProto(job.mesh);
  for (const Tensor* t : job.args) {
    *spec->add_args() = HeaderToProto(t->dtype(), t->shape());
  }
  for (const auto& s : job.in_specs) *spec->add_in_specs() = SpecToProto(s);
  for (const auto& s : job.out_specs) *spec->add_out_specs() = SpecToProto(s);
  spec->set_kwargs_json(job.kwargs_json);
  spec->set_no_check_rep(!job.check_rep);

  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + job.timeout));
  auto stream = stub_->RunJob(&context);

  // Send on a second thread while this one reads, so a coordinator that
  // rejects the job early answers at once instead of after the upload.
  std::thread sender([&] {
    if (!stream->Write(request)) return;
    for (size_t i = 0; i < job.args.size(); ++i) {
      const bool ok = SendTensorChunks(static_cast<uint32_t>(i), *job.args[i],
                                       [&](v1::ArrayChunk&& chunk) {
                                         v1::RunJobRequest r;
                                         *r.mutable_chunk() = std::move(chunk);
                                         return stream->Write(r);
                                       });
      if (!ok) return;
    }
    stream->WritesDone();
  });

  JobResult result;
  absl::Status status;
  v1::RunJobResponse response;
  if (stream->Read(&response)) {
    if (!response.has_result()) {
      status = absl::InternalError("coordinator sent chunks before the result");
    } else {
      result.job_id = response.result().job_id();
      result.coordinator_seconds = response.result().seconds();
      result.num_devices = response.result().num_devices();
      for (int i = 0; status.ok() && i < response.result().outputs_size();
           ++i) {
        auto meta = HeaderFromProto(response.result().outputs(i),
                                    absl::StrCat("output ", i));
        if (!meta.ok()) {
          status = meta.status();
          break;
        }
        auto t = Tensor::Create(meta->dtype, meta->shape);
        if (!t.ok()) {
          status = t.status();
          break;
        }
        result.outputs.push_back(*std::move(t));
      }
      ChunkSequencer sequencer =
          ChunkSequencer::ForTensors(result.outputs, "output");
      while (status.ok() && stream->Read(&response)) {
        status =
            response.has_chunk()
                ? sequencer.Accept(response.chunk())
                : absl::InternalError("unexpected message after the result");
      }
      if (status.ok()) status = sequencer.Finish();
    }
  }
  if (!status.ok()) context.TryCancel();
  sender.join();
  const absl::Status rpc = FromGrpcStatus(stream->Finish());
  if (!rpc.ok()) return rpc;
  if (!status.ok()) return status;
  return result;
}

absl::StatusOr<std::vector<v1::FunctionSignature>> ShardClient::ListFunctions()
    const {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + options_.rpc_timeout));
  v1::ListFunctionsResponse response;
  grpc::Status s =
      stub_->ListFunctions(&context, v1::ListFunctionsRequest(), &response);
  if (!s.ok()) return FromGrpcStatus(s);
  return std::vector<v1::FunctionSignature>(response.functions().begin(),
                                            response.functions().end());
}

absl::StatusOr<v1::ClusterStatusResponse> ShardClient::Status() const {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + options_.rpc_timeout));
  v1::ClusterStatusResponse response;
  grpc::Status s =
      stub_->GetClusterStatus(&context, v1::ClusterStatusRequest(), &response);
  if (!s.ok()) return FromGrpcStatus(s);
  return response;
}

absl::Status ShardClient::WaitForWorkers(int n, absl::Duration timeout) const {
  const absl::Time end = absl::Now() + timeout;
  int live = 0;
  absl::Status last;
  while (absl::Now() < end) {
    auto status = Status();
    if (status.ok()) {
      live = status->workers_size();
      if (live >= n) return absl::OkStatus();
    } else {
      last = status.status();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "waited ", absl::FormatDuration(timeout), " for ", n, " workers; ", live,
      " registered",
      last.ok() ? "" : absl::StrCat(" (last error: ", last.message(), ")")));
}

}  // namespace shardmap
