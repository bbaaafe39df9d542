#include "server/worker_calls.h"

#include <grpcpp/grpcpp.h>

#include "core/status_util.h"
#include "rpc/grpc_status.h"

namespace shardmap {

template <typename Request, typename Response, typename Method>
absl::Status WorkerCalls::Call(const std::string& address, Method method,
                               const Request& request, Response* response,
                               absl::Time deadline) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(deadline));
  std::shared_ptr<grpc::Channel> channel;
  std::shared_ptr<v1::Worker::Stub> stub =
      channels_->Stub<v1::Worker>(address, &channel);
  absl::Status s =
      FromGrpcStatus(((*stub).*method)(&context, request, response));
  channels_->OnCallEnded(address, channel, s);
  return s;
}

absl::Status WorkerCalls::DropArray(const std::string& address,
                                    const std::string& name,
                                    absl::Time deadline, uint64_t version) {
  v1::DropArrayRequest request;
  request.set_name(name);
  request.set_version(version);
  v1::DropArrayResponse response;
  return Call(address, &v1::Worker::Stub::DropArray, request, &response,
              deadline);
}

absl::StatusOr<uint64_t> WorkerCalls::SaveBlock(
    const std::string& address, const v1::SaveBlockRequest& request,
    absl::Time deadline) {
  v1::SaveBlockResponse response;
  SHARD_RETURN_IF_ERROR(Call(address, &v1::Worker::Stub::SaveBlock, request,
                             &response, deadline));
  return response.digest();
}

absl::Status WorkerCalls::LoadBlock(const std::string& address,
                                    const v1::LoadBlockRequest& request,
                                    absl::Time deadline) {
  v1::LoadBlockResponse response;
  return Call(address, &v1::Worker::Stub::LoadBlock, request, &response,
              deadline);
}

}  // namespace shardmap
