// Test helper: a Worker service on 127.0.0.1:0 with scripted answers, for
// the units that call workers (ChannelCache, WorkerCalls,
// GrpcWorkerConnector). Every method answers `answer`, except SaveBlock,
// which waits until the caller cancels or gives up (a bounded wait), to
// test deadlines.
//
// Thread-safe.
#ifndef SHARDMAP_TESTS_UNIT_FAKE_WORKER_SERVER_H_
#define SHARDMAP_TESTS_UNIT_FAKE_WORKER_SERVER_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/time/clock.h"
#include "shardmap/v1/worker.grpc.pb.h"
#include "tests/unit/local_server.h"

namespace shardmap {

class FakeWorkerServer {
 public:
  explicit FakeWorkerServer(grpc::Status answer) : service_(answer) {
    server_ = StartLocalServer(&service_, &address_);
  }
  ~FakeWorkerServer() { Stop(); }

  const std::string& address() const { return address_; }
  // Stops serving; the port closes.
  void Stop() {
    if (server_) server_->Shutdown(std::chrono::system_clock::now());
    server_.reset();
  }

 private:
  class Service final : public v1::Worker::Service {
   public:
    explicit Service(grpc::Status answer) : answer_(std::move(answer)) {}
    grpc::Status RunShard(
        grpc::ServerContext*,
        grpc::ServerReaderWriter<v1::ShardResponse, v1::ShardRequest>*)
        override {
      return answer_;
    }
    grpc::Status DropArray(grpc::ServerContext*, const v1::DropArrayRequest*,
                           v1::DropArrayResponse*) override {
      return answer_;
    }
    grpc::Status SkipTickets(grpc::ServerContext*,
                             const v1::SkipTicketsRequest*,
                             v1::SkipTicketsResponse*) override {
      return answer_;
    }
    grpc::Status SaveBlock(grpc::ServerContext* context,
                           const v1::SaveBlockRequest*,
                           v1::SaveBlockResponse*) override {
      const absl::Time give_up = absl::Now() + absl::Minutes(1);
      while (!context->IsCancelled() && absl::Now() < give_up) {
        absl::SleepFor(absl::Milliseconds(5));
      }
      return grpc::Status(grpc::StatusCode::INTERNAL, "never cancelled");
    }

   private:
    const grpc::Status answer_;
  };

  Service service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

}  // namespace shardmap

#endif  // SHARDMAP_TESTS_UNIT_FAKE_WORKER_SERVER_H_
