#include "rpc/callback_pool.h"

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <memory>

#include "absl/synchronization/notification.h"

namespace shardmap {
namespace {

// Never destroyed: its server and channel hold the pool until exit.
struct Keeper {
  grpc::CallbackGenericService service;  // answers UNIMPLEMENTED
  std::unique_ptr<grpc::Server> server;
  std::shared_ptr<grpc::Channel> channel;
  // The call's state outlives any wait for it.
  grpc::ClientContext context;
  grpc::Slice empty;
  grpc::ByteBuffer request{&empty, 1};  // a default one cannot be sent
  grpc::ByteBuffer response;
  absl::Notification done;
};

bool Start() {
  auto* keeper = new Keeper;
  grpc::ServerBuilder builder;
  builder.RegisterCallbackGenericService(&keeper->service);
  keeper->server = builder.BuildAndStart();
  if (keeper->server == nullptr) {
    spdlog::warn(
        "could not start the in-process server that keeps gRPC's "
        "callback threads");
    return false;
  }
  keeper->channel = keeper->server->InProcessChannel(grpc::ChannelArguments());
  keeper->context.set_deadline(std::chrono::system_clock::now() +
                               std::chrono::seconds(30));
  grpc::GenericStub stub(keeper->channel);
  stub.UnaryCall(&keeper->context, "/shardmap.KeepCallbackPool/Keep",
                 grpc::StubOptions(), &keeper->request, &keeper->response,
                 [keeper](grpc::Status) { keeper->done.Notify(); });
  // Bounded by the call's own deadline.
  if (!keeper->done.WaitForNotificationWithTimeout(absl::Seconds(35))) {
    spdlog::warn("the call that keeps gRPC's callback threads did not end");
    return false;
  }
  return true;
}

}  // namespace

bool KeepCallbackPool() {
  static const bool kept = Start();
  return kept;
}

}  // namespace shardmap
