// Keeps gRPC's callback threads alive for the whole test binary.
//
// gRPC 1.51 (without a background poller) runs callback reactions on one
// process-wide pool of threads that exists while any channel or server uses
// callbacks, and is torn down when the last of them goes. When that last
// one goes on one of the pool's own threads (a reactor dropping the last
// reference to a channel in OnDone), the pool cannot join that thread and
// frees the completion queue under it: the process aborts in
// grpc_cq_internal_unref (upstream: grpc/grpc#32584). Long-lived processes
// never get there (their server holds the pool); tests, which start and
// drop servers and channels all the time, do. This environment holds the
// pool from the first test to the last, through one in-process channel
// that made a callback call: no port, no network.
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace shardmap {
namespace {

class CallbackPoolKeeper final : public ::testing::Environment {
 public:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.RegisterCallbackGenericService(&service_);  // answers UNIMPLEMENTED
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    channel_ = server_->InProcessChannel(grpc::ChannelArguments());
    grpc::GenericStub stub(channel_);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(30));
    grpc::Slice empty;
    grpc::ByteBuffer request(&empty, 1);  // a default one cannot be sent
    grpc::ByteBuffer response;
    absl::Notification done;
    stub.UnaryCall(&context, "/shardmap.test/Keep", grpc::StubOptions(),
                   &request, &response,
                   [&done](grpc::Status) { done.Notify(); });
    ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(60)));
  }

  void TearDown() override {
    channel_.reset();
    server_->Shutdown(std::chrono::system_clock::now());
    server_->Wait();
    server_.reset();
  }

 private:
  grpc::CallbackGenericService service_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

[[maybe_unused]] ::testing::Environment* const kKeeper =
    ::testing::AddGlobalTestEnvironment(new CallbackPoolKeeper);

}  // namespace
}  // namespace shardmap
