#include "server/worker_calls.h"

#include <grpcpp/grpcpp.h>

#include "core/status_util.h"
#include "rpc/channel.h"
#include "rpc/grpc_status.h"

namespace shardmap {
namespace {
constexpr absl::Duration kCallTimeout = absl::Minutes(2);

void SetDeadline(grpc::ClientContext& context) {
  context.set_deadline(absl::ToChronoTime(absl::Now() + kCallTimeout));
}
}  // namespace

std::shared_ptr<v1::Worker::Stub> WorkerCalls::Stub(
    const std::string& address) {
  absl::MutexLock lock(&mu_);
  auto& slot = stubs_[address];
  if (!slot) slot = v1::Worker::NewStub(MakeChannel(address));
  return slot;
}

absl::Status WorkerCalls::DropArray(const std::string& address,
                                    const std::string& name) {
  grpc::ClientContext context;
  SetDeadline(context);
  v1::DropArrayRequest request;
  request.set_name(name);
  v1::DropArrayResponse response;
  return FromGrpcStatus(Stub(address)->DropArray(&context, request, &response));
}

absl::StatusOr<uint64_t> WorkerCalls::SaveBlock(
    const std::string& address, const v1::SaveBlockRequest& request) {
  grpc::ClientContext context;
  SetDeadline(context);
  v1::SaveBlockResponse response;
  SHARD_RETURN_IF_ERROR(
      FromGrpcStatus(Stub(address)->SaveBlock(&context, request, &response)));
  return response.digest();
}

absl::Status WorkerCalls::LoadBlock(const std::string& address,
                                    const v1::LoadBlockRequest& request) {
  grpc::ClientContext context;
  SetDeadline(context);
  v1::LoadBlockResponse response;
  return FromGrpcStatus(Stub(address)->LoadBlock(&context, request, &response));
}

}  // namespace shardmap
