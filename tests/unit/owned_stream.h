// Test helper of the BlockingServerStream tests
// (blocking_server_stream_test.cc, blocking_server_stream_read_ahead_test.cc):
// a real gRPC server on 127.0.0.1:0 that hands each call to an "owner"
// thread, which uses the stream as a synchronous handler would, as the
// coordinator's RunJob does.
#ifndef SHARDMAP_TESTS_UNIT_OWNED_STREAM_H_
#define SHARDMAP_TESTS_UNIT_OWNED_STREAM_H_

#include <grpcpp/generic/async_generic_service.h>
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "rpc/blocking_server_stream.h"
#include "rpc/raw_method.h"
#include "tests/unit/byte_buffers.h"
#include "tests/unit/wait_until.h"

namespace shardmap {

class OwnedStream;

// Reads every message and writes it back, then a last message that leaves
// with the status `end`.
inline void Echo(OwnedStream* s, grpc::Status end);

inline std::atomic<int> live_owned_streams{0};

class OwnedStreamService;

// A call, and the thread that owns it: started with the call, or (when
// readable) once the call's first message or its end is in, as RunJob's.
class OwnedStream final : public BlockingServerStream {
 public:
  using Owner = std::function<void(OwnedStream*)>;
  OwnedStream(OwnedStreamService* service, bool when_readable);
  ~OwnedStream() override {
    --live_owned_streams;
    latest.compare_exchange_strong(self_, nullptr);
  }
  // The latest call's stream, while it lives.
  static inline std::atomic<OwnedStream*> latest{nullptr};

 private:
  OwnedStream* self_ = this;
};

class OwnedStreamService final : public grpc::CallbackGenericService {
 public:
  OwnedStreamService(OwnedStream::Owner owner, bool when_readable)
      : owner_(std::move(owner)), when_readable_(when_readable) {}
  ~OwnedStreamService() override { JoinOwners(); }
  void JoinOwners() {
    absl::MutexLock lock(&mu_);
    for (auto& t : threads_) t.join();
    threads_.clear();
  }
  void StartOwner(OwnedStream* s) {
    absl::MutexLock lock(&mu_);
    threads_.emplace_back([this, s] { owner_(s); });
  }
  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext* context) override {
    return new OwnedStream(this, when_readable_);
  }

 private:
  const OwnedStream::Owner owner_;
  const bool when_readable_;
  absl::Mutex mu_;
  std::vector<std::thread> threads_;
};

inline OwnedStream::OwnedStream(OwnedStreamService* service,
                                bool when_readable) {
  ++live_owned_streams;
  latest = this;
  if (when_readable) {
    CallWhenReadable([this, service] { service->StartOwner(this); });
  } else {
    service->StartOwner(this);
  }
}

class BlockingServerStreamTest : public ::testing::Test {
 protected:
  // Serves every call with `owner` on its own thread.
  void Serve(OwnedStream::Owner owner, bool when_readable = false) {
    service_ =
        std::make_unique<OwnedStreamService>(std::move(owner), when_readable);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    builder.RegisterCallbackGenericService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(port, 0);
    method_ = std::make_unique<RawBidiMethod>(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                            grpc::InsecureChannelCredentials()),
        "/test.Owned/Call");
  }
  // Serves every call with Echo, once the test calls Go (or ends).
  void ServeHeldEcho(bool when_readable) {
    Serve(
        [this](OwnedStream* s) {
          EXPECT_TRUE(go_.WaitForNotificationWithTimeout(absl::Seconds(30)));
          Echo(s, grpc::Status::OK);
        },
        when_readable);
  }
  void Go() {
    if (!go_.HasBeenNotified()) go_.Notify();
  }
  void TearDown() override {
    Go();  // a test that failed early leaves no owner held
    if (server_) {
      server_->Shutdown(std::chrono::system_clock::now() +
                        std::chrono::seconds(10));
    }
    if (service_) service_->JoinOwners();
    if (writer_.joinable()) writer_.join();
    server_.reset();
    service_.reset();
    // Every call's reactor is deleted once gRPC is done with it.
    EXPECT_TRUE(WaitUntil([] { return live_owned_streams == 0; }));
  }

  // A call of the test's method, bounded by a 30 s deadline.
  std::unique_ptr<RawBidiMethod::Stream> Call(grpc::ClientContext* context) {
    context->set_deadline(std::chrono::system_clock::now() +
                          std::chrono::seconds(30));
    return method_->Call(context);
  }
  // Every message the server sends, to the end of the call.
  static std::vector<std::string> ReadAll(RawBidiMethod::Stream* stream) {
    std::vector<std::string> got;
    grpc::ByteBuffer m;
    while (stream->Read(&m)) got.push_back(BufferBytes(m));
    return got;
  }

  std::unique_ptr<OwnedStreamService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<RawBidiMethod> method_;
  absl::Notification go_;
  std::thread writer_;  // a test's client writer, joined at TearDown
};

inline void Echo(OwnedStream* s, grpc::Status end) {
  grpc::ByteBuffer m;
  while (s->Read(&m)) EXPECT_TRUE(s->Write(m, grpc::WriteOptions()));
  EXPECT_TRUE(
      s->Write(BufferOf("last"), grpc::WriteOptions().set_last_message()));
  s->FinishWhenWritten(end);
}

}  // namespace shardmap

#endif  // SHARDMAP_TESTS_UNIT_OWNED_STREAM_H_
