// BlockingServerStream against a real gRPC server on 127.0.0.1:0: each call
// is handed to an "owner" thread that uses the stream as a synchronous
// handler would, as the coordinator's RunJob does.
#include "rpc/blocking_server_stream.h"

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
#include "rpc/raw_method.h"
#include "tests/unit/byte_buffers.h"
#include "tests/unit/wait_until.h"

namespace shardmap {
namespace {

std::atomic<int> live_streams{0};

class Service;

// A call, and the thread that owns it: started with the call, or (when
// readable) once the call's first message or its end is in, as RunJob's.
class OwnedStream final : public BlockingServerStream {
 public:
  using Owner = std::function<void(OwnedStream*)>;
  OwnedStream(Service* service, bool when_readable);
  ~OwnedStream() override {
    --live_streams;
    latest.compare_exchange_strong(self_, nullptr);
  }
  // The latest call's stream, while it lives.
  static inline std::atomic<OwnedStream*> latest{nullptr};

 private:
  OwnedStream* self_ = this;
};

class Service final : public grpc::CallbackGenericService {
 public:
  Service(OwnedStream::Owner owner, bool when_readable)
      : owner_(std::move(owner)), when_readable_(when_readable) {}
  ~Service() override { JoinOwners(); }
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

OwnedStream::OwnedStream(Service* service, bool when_readable) {
  ++live_streams;
  latest = this;
  if (when_readable) {
    CallWhenReadable([this, service] { service->StartOwner(this); });
  } else {
    service->StartOwner(this);
  }
}

void Echo(OwnedStream* s, grpc::Status end);

class BlockingServerStreamTest : public ::testing::Test {
 protected:
  // Serves every call with `owner` on its own thread.
  void Serve(OwnedStream::Owner owner, bool when_readable = false) {
    service_ = std::make_unique<Service>(std::move(owner), when_readable);
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
  // Serves every call with Echo, once `go` is notified.
  void ServeHeldEcho(absl::Notification* go) {
    Serve([go](OwnedStream* s) {
      EXPECT_TRUE(go->WaitForNotificationWithTimeout(absl::Seconds(30)));
      Echo(s, grpc::Status::OK);
    });
  }
  void TearDown() override {
    if (server_) {
      server_->Shutdown(std::chrono::system_clock::now() +
                        std::chrono::seconds(10));
    }
    if (service_) service_->JoinOwners();
    server_.reset();
    service_.reset();
    // Every call's reactor is deleted once gRPC is done with it.
    EXPECT_TRUE(WaitUntil([] { return live_streams == 0; }));
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

  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<RawBidiMethod> method_;
};

// Reads every message and writes it back, then a last message that leaves
// with the status `end`.
void Echo(OwnedStream* s, grpc::Status end) {
  grpc::ByteBuffer m;
  while (s->Read(&m)) EXPECT_TRUE(s->Write(m, grpc::WriteOptions()));
  EXPECT_TRUE(
      s->Write(BufferOf("last"), grpc::WriteOptions().set_last_message()));
  s->FinishWhenWritten(end);
}

TEST_F(BlockingServerStreamTest, EchoesEveryMessageInOrderThenTheLastOne) {
  Serve([](OwnedStream* s) { Echo(s, grpc::Status::OK); });
  grpc::ClientContext context;
  auto stream = Call(&context);
  // Sizes from 1 byte to 300 KiB: together far more than the 4 MiB the
  // stream queues, so writing and reading must overlap.
  std::vector<std::string> sent;
  for (int i = 0; i < 200; ++i) {
    sent.push_back(std::string(1 + (i * 7919) % (300 << 10), 'a' + i % 26));
  }
  std::thread writer([&] {
    for (const std::string& m : sent) ASSERT_TRUE(stream->Write(BufferOf(m)));
    stream->WritesDone();
  });
  const std::vector<std::string> got = ReadAll(stream.get());
  writer.join();
  EXPECT_TRUE(stream->Finish().ok());
  ASSERT_EQ(got.size(), sent.size() + 1);
  for (size_t i = 0; i < sent.size(); ++i) {
    EXPECT_EQ(got[i], sent[i]) << "message " << i;
  }
  EXPECT_EQ(got.back(), "last");
}

// As a synchronous handler's WriteLast then error: the client gets the
// message, then the status.
TEST_F(BlockingServerStreamTest, TheLastMessageLeavesWithAnErrorStatusToo) {
  Serve([](OwnedStream* s) {
    Echo(s, grpc::Status(grpc::StatusCode::ABORTED, "the job failed late"));
  });
  grpc::ClientContext context;
  auto stream = Call(&context);
  ASSERT_TRUE(stream->Write(BufferOf("x")));
  stream->WritesDone();
  const std::vector<std::string> got = ReadAll(stream.get());
  const grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::ABORTED);
  EXPECT_EQ(status.error_message(), "the job failed late");
  EXPECT_EQ(got, (std::vector<std::string>{"x", "last"}));
}

// A client that cancels ends a Read waiting for a message that never
// comes, and the stream then says it was cancelled (gRPC may report the
// end of the reads before the cancel).
TEST_F(BlockingServerStreamTest, ACancelEndsARead) {
  std::atomic<bool> read_returned{false}, read_result{true}, saw_cancel{false};
  Serve([&](OwnedStream* s) {
    grpc::ByteBuffer m;
    read_result = s->Read(&m);
    saw_cancel = WaitUntil([s] { return s->cancelled(); });
    read_returned = true;
    s->FinishWhenWritten(grpc::Status::OK);
  });
  grpc::ClientContext context;
  auto stream = Call(&context);
  ASSERT_TRUE(WaitUntil([] { return live_streams == 1; }));
  context.TryCancel();
  ASSERT_TRUE(WaitUntil([&] { return read_returned.load(); }));
  EXPECT_FALSE(read_result);
  EXPECT_TRUE(saw_cancel);
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
}

// A client that reads nothing holds the writer back (a bounded queue, not
// all of it buffered), and its cancel ends the wait: Write says false.
TEST_F(BlockingServerStreamTest, AWriterWaitsForRoomUntilTheCallEnds) {
  constexpr int kMessages = 256;  // 1 MiB each
  std::atomic<int> written{0};
  std::atomic<bool> done{false}, last_write{true};
  Serve([&](OwnedStream* s) {
    const grpc::ByteBuffer mib = BufferOf(std::string(1 << 20, 'm'));
    bool ok = true;
    for (int i = 0; i < kMessages && ok; ++i) {
      ok = s->Write(mib, grpc::WriteOptions());
      if (ok) ++written;
    }
    last_write = ok;
    done = true;
    s->FinishWhenWritten(grpc::Status::OK);
  });
  grpc::ClientContext context;
  auto stream = Call(&context);
  ASSERT_TRUE(stream->Write(BufferOf("go")));
  ASSERT_TRUE(WaitUntil([&] { return written >= 2; }));
  context.TryCancel();
  ASSERT_TRUE(WaitUntil([&] { return done.load(); }));
  EXPECT_FALSE(last_write);
  EXPECT_LT(written, kMessages);
  stream->Finish();
}

// With a wait limit, a Read that nothing answers ends at the limit by
// itself (the call stays open: the client is still there), and a Write
// after the last message fails without being sent.
TEST_F(BlockingServerStreamTest, AWaitLimitEndsAReadAndNothingFollowsTheLast) {
  std::atomic<bool> done{false}, read_result{true}, write_after_last{true};
  std::atomic<int64_t> waited_ms{0};
  Serve([&](OwnedStream* s) {
    s->SetWaitLimit(absl::Now() + absl::Milliseconds(200));
    const absl::Time start = absl::Now();
    grpc::ByteBuffer m;
    read_result = s->Read(&m);
    waited_ms = absl::ToInt64Milliseconds(absl::Now() - start);
    EXPECT_TRUE(
        s->Write(BufferOf("last"), grpc::WriteOptions().set_last_message()));
    write_after_last = s->Write(BufferOf("more"), grpc::WriteOptions());
    done = true;
    s->FinishWhenWritten(grpc::Status::OK);
  });
  grpc::ClientContext context;
  auto stream = Call(&context);
  const std::vector<std::string> got = ReadAll(stream.get());
  EXPECT_TRUE(stream->Finish().ok());
  ASSERT_TRUE(done);
  EXPECT_FALSE(read_result);
  EXPECT_GE(waited_ms, 190);  // not before the limit
  EXPECT_FALSE(write_after_last);
  EXPECT_EQ(got, (std::vector<std::string>{"last"}));
}

// The reactions read the client's messages and its half-close ahead of the
// owner, which is held: a small call is all in before its owner looks.
TEST_F(BlockingServerStreamTest, ReadsAClientsMessagesAheadOfItsOwner) {
  absl::Notification go;
  ServeHeldEcho(&go);
  grpc::ClientContext context;
  auto stream = Call(&context);
  for (const char* m : {"a", "bb", "ccc"}) {
    ASSERT_TRUE(stream->Write(BufferOf(m)));
  }
  stream->WritesDone();
  ASSERT_TRUE(WaitUntil([] {
    OwnedStream* s = OwnedStream::latest;
    return s != nullptr && s->reads_over();
  }));
  EXPECT_EQ(OwnedStream::latest.load()->unread_bytes(), 6u);
  go.Notify();
  EXPECT_EQ(ReadAll(stream.get()),
            (std::vector<std::string>{"a", "bb", "ccc", "last"}));
  EXPECT_TRUE(stream->Finish().ok());
}

// Reading ahead stops once kMaxReadAheadBytes wait unread, and resumes as
// the owner reads: nothing is lost or reordered.
TEST_F(BlockingServerStreamTest, ReadingAheadStopsAtItsBoundAndResumes) {
  // Two messages fill the bound; two more and the end stay unread.
  constexpr size_t kBytes = BlockingServerStream::kMaxReadAheadBytes / 2;
  constexpr size_t kMessages = 4;
  absl::Notification go;
  ServeHeldEcho(&go);
  grpc::ClientContext context;
  auto stream = Call(&context);
  std::vector<std::string> sent;
  for (size_t i = 0; i < kMessages; ++i) {
    sent.push_back(std::string(kBytes, 'a' + i));
  }
  std::thread writer([&] {
    for (const std::string& m : sent) ASSERT_TRUE(stream->Write(BufferOf(m)));
    stream->WritesDone();
  });
  ASSERT_TRUE(WaitUntil([] {
    OwnedStream* s = OwnedStream::latest;
    return s != nullptr &&
           s->unread_bytes() >= BlockingServerStream::kMaxReadAheadBytes;
  }));
  OwnedStream* s = OwnedStream::latest;
  EXPECT_EQ(s->unread_bytes(), BlockingServerStream::kMaxReadAheadBytes);
  EXPECT_FALSE(s->reads_over());
  go.Notify();
  std::vector<std::string> got = ReadAll(stream.get());
  writer.join();
  EXPECT_TRUE(stream->Finish().ok());
  ASSERT_EQ(got.size(), kMessages + 1);
  got.pop_back();
  EXPECT_TRUE(got == sent);
}

// An owner started when the call is readable starts with the first
// message, before the client's half-close, and not before it: and a call
// that ends without a message starts it too.
TEST_F(BlockingServerStreamTest, AnOwnerStartsWithTheFirstMessageOrTheEnd) {
  std::atomic<int> started{0};
  Serve(
      [&](OwnedStream* s) {
        ++started;
        Echo(s, grpc::Status::OK);
      },
      /*when_readable=*/true);
  {
    grpc::ClientContext context;
    auto stream = Call(&context);
    ASSERT_TRUE(WaitUntil([] { return live_streams == 1; }));
    EXPECT_EQ(started, 0);
    ASSERT_TRUE(stream->Write(BufferOf("first")));
    ASSERT_TRUE(WaitUntil([&] { return started == 1; }));
    stream->WritesDone();
    EXPECT_EQ(ReadAll(stream.get()),
              (std::vector<std::string>{"first", "last"}));
    EXPECT_TRUE(stream->Finish().ok());
  }
  grpc::ClientContext context;
  auto stream = Call(&context);
  stream->WritesDone();
  EXPECT_EQ(ReadAll(stream.get()), (std::vector<std::string>{"last"}));
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_EQ(started, 2);
}

}  // namespace
}  // namespace shardmap
