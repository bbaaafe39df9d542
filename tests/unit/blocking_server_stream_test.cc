// BlockingServerStream against a real gRPC server on 127.0.0.1:0
// (tests/unit/owned_stream.h): echoes, the last message, cancels, a full
// write queue, the wait limit.
#include "rpc/blocking_server_stream.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "tests/unit/owned_stream.h"

namespace shardmap {
namespace {

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
  ASSERT_TRUE(WaitUntil([] { return live_owned_streams == 1; }));
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

}  // namespace
}  // namespace shardmap
