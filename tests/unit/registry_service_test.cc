// The registry service over gRPC on 127.0.0.1:0: what a worker says when
// it registers reaches the pool.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <string>

#include "server/coordinator_service.h"
#include "server/worker_pool.h"
#include "shardmap/v1/registry.grpc.pb.h"
#include "tests/unit/local_server.h"

namespace shardmap {
namespace {

// A worker that registers with `inline_chunks` set is sent small arguments
// inside its job headers; one that predates the field (unset) is not.
TEST(RegistryServiceTest, TheInlineChunksCapabilityReachesThePool) {
  spdlog::set_level(spdlog::level::warn);  // the pool logs every join
  WorkerPool pool{WorkerPool::Options{}};
  RegistryService service(&pool, nullptr);
  std::string address;
  const std::unique_ptr<grpc::Server> server =
      StartLocalServer(&service, &address);
  ASSERT_NE(server, nullptr);
  auto stub = v1::WorkerRegistry::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  for (const bool takes : {true, false}) {
    v1::RegisterRequest request;
    request.set_address(takes ? "127.0.0.1:7001" : "127.0.0.1:7002");
    request.set_incarnation(1);
    if (takes) request.set_inline_chunks(true);
    v1::RegisterResponse response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(30));
    const grpc::Status s = stub->Register(&context, request, &response);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  const std::vector<WorkerPool::Worker> live = pool.LiveWorkers();
  ASSERT_EQ(live.size(), 2u);
  EXPECT_EQ(live[0].address, "127.0.0.1:7001");
  EXPECT_TRUE(live[0].inline_chunks);
  EXPECT_EQ(live[1].address, "127.0.0.1:7002");
  EXPECT_FALSE(live[1].inline_chunks);
}

}  // namespace
}  // namespace shardmap
