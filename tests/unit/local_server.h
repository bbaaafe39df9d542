// Test helper: a plaintext gRPC server on 127.0.0.1 at a free port, for
// the tests that need a real server (fake workers, job links, shm attach).
#ifndef SHARDMAP_TESTS_UNIT_LOCAL_SERVER_H_
#define SHARDMAP_TESTS_UNIT_LOCAL_SERVER_H_

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace shardmap {

// Serves `service` (not owned; outlives the server); `*address` receives
// the server's "127.0.0.1:PORT".
inline std::unique_ptr<grpc::Server> StartLocalServer(grpc::Service* service,
                                                      std::string* address) {
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                           &port);
  builder.RegisterService(service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    ADD_FAILURE() << "could not start a gRPC server on 127.0.0.1:0";
  }
  *address = "127.0.0.1:" + std::to_string(port);
  return server;
}

}  // namespace shardmap

#endif  // SHARDMAP_TESTS_UNIT_LOCAL_SERVER_H_
