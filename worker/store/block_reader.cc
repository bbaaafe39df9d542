#include "worker/store/block_reader.h"

#include <grpcpp/grpcpp.h>

#include "core/status_util.h"
#include "rpc/channel_cache.h"
#include "rpc/grpc_status.h"

namespace shardmap {

absl::StatusOr<std::string> BlockReader::Read(
    const std::string& address, const v1::ReadBlockRequest& request,
    absl::Time deadline) {
  std::shared_ptr<grpc::Channel> channel;
  std::shared_ptr<v1::Worker::Stub> stub =
      channels_->Stub<v1::Worker>(address, &channel);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(deadline));
  auto reader = stub->ReadBlock(&context, request);
  std::string out;
  v1::ArrayChunk chunk;
  while (reader->Read(&chunk)) {
    if (chunk.offset() != out.size()) {
      context.TryCancel();
      static_cast<void>(reader->Finish());
      return absl::InternalError("ReadBlock chunks out of order");
    }
    out += chunk.data();
  }
  absl::Status s = FromGrpcStatus(reader->Finish());
  channels_->OnCallEnded(address, channel, s);
  SHARD_RETURN_IF_ERROR(s);
  return out;
}

}  // namespace shardmap
