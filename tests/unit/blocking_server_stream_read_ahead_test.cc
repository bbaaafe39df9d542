// BlockingServerStream's reading ahead and CallWhenReadable, against a real
// gRPC server on 127.0.0.1:0 (tests/unit/owned_stream.h).
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "rpc/blocking_server_stream.h"
#include "tests/unit/owned_stream.h"

namespace shardmap {
namespace {

using ReadAheadTest = BlockingServerStreamTest;

// Writes `messages`, then the half-close.
void SendAll(RawBidiMethod::Stream* stream,
             const std::vector<std::string>& messages) {
  for (const std::string& m : messages) ASSERT_TRUE(stream->Write(BufferOf(m)));
  stream->WritesDone();
}

// The latest call's stream, once `ready` holds of it (null if it never
// does).
OwnedStream* LatestOnce(const std::function<bool(OwnedStream*)>& ready) {
  OwnedStream* found = nullptr;
  WaitUntil([&] {
    found = OwnedStream::latest;
    return found != nullptr && ready(found);
  });
  return found != nullptr && ready(found) ? found : nullptr;
}

// Once the owner engaged the call (CallWhenReadable, as RunJob does), the
// reactions read the client's messages and its half-close ahead of it,
// while it is held: a small call is all in before its owner looks.
TEST_F(ReadAheadTest, ReadsAClientsMessagesAheadOfItsOwner) {
  ServeHeldEcho(/*when_readable=*/true);
  grpc::ClientContext context;
  auto stream = Call(&context);
  SendAll(stream.get(), {"a", "bb", "ccc"});
  OwnedStream* s = LatestOnce([](OwnedStream* c) { return c->reads_over(); });
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->unread_bytes(), 6u);
  Go();
  EXPECT_EQ(ReadAll(stream.get()),
            (std::vector<std::string>{"a", "bb", "ccc", "last"}));
  EXPECT_TRUE(stream->Finish().ok());
}

// A call its owner has not engaged (one waiting for its turn) holds its
// first message only; the owner's first Read engages it.
TEST_F(ReadAheadTest, ACallNotEngagedHoldsItsFirstMessageOnly) {
  ServeHeldEcho(/*when_readable=*/false);
  grpc::ClientContext context;
  auto stream = Call(&context);
  SendAll(stream.get(), {"a", "bb", "ccc"});
  OwnedStream* s =
      LatestOnce([](OwnedStream* c) { return c->unread_bytes() > 0; });
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->unread_bytes(), 1u);
  EXPECT_FALSE(s->reads_over());
  Go();
  EXPECT_EQ(ReadAll(stream.get()),
            (std::vector<std::string>{"a", "bb", "ccc", "last"}));
  EXPECT_TRUE(stream->Finish().ok());
}

// Reading ahead stops once kMaxReadAheadBytes wait unread, and resumes as
// the owner reads: nothing is lost or reordered.
TEST_F(ReadAheadTest, StopsAtItsBoundAndResumes) {
  // Two messages fill the bound; two more and the end stay unread.
  constexpr size_t kBytes = BlockingServerStream::kMaxReadAheadBytes / 2;
  constexpr size_t kMessages = 4;
  ServeHeldEcho(/*when_readable=*/true);
  grpc::ClientContext context;
  auto stream = Call(&context);
  std::vector<std::string> sent;
  for (size_t i = 0; i < kMessages; ++i) {
    sent.push_back(std::string(kBytes, 'a' + i));
  }
  writer_ = std::thread([&] { SendAll(stream.get(), sent); });
  OwnedStream* s = LatestOnce([](OwnedStream* c) {
    return c->unread_bytes() >= BlockingServerStream::kMaxReadAheadBytes;
  });
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->unread_bytes(), BlockingServerStream::kMaxReadAheadBytes);
  EXPECT_FALSE(s->reads_over());
  Go();
  std::vector<std::string> got = ReadAll(stream.get());
  writer_.join();
  EXPECT_TRUE(stream->Finish().ok());
  ASSERT_EQ(got.size(), kMessages + 1);
  for (size_t i = 0; i < kMessages; ++i) {
    EXPECT_EQ(got[i], sent[i]) << "message " << i;
  }
}

// An owner started when the call is readable starts with the first
// message, before the client's half-close, and not before it; a call that
// ends without a message starts it too.
TEST_F(ReadAheadTest, AnOwnerStartsWithTheFirstMessageOrTheEnd) {
  std::atomic<int> started{0};
  Serve(
      [&](OwnedStream* s) {
        // Something is in whenever the owner starts.
        EXPECT_TRUE(s->unread_bytes() > 0 || s->reads_over());
        ++started;
        Echo(s, grpc::Status::OK);
      },
      /*when_readable=*/true);
  {
    grpc::ClientContext context;
    auto stream = Call(&context);
    ASSERT_TRUE(WaitUntil([] { return live_owned_streams == 1; }));
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

// CallWhenReadable on a call that is readable already calls its function
// at once, on the calling thread (RunJob's turn came after its first
// message).
TEST_F(ReadAheadTest, CallWhenReadableOnAReadableCallRunsAtOnce) {
  std::thread::id ran_on;
  std::thread::id owner;
  Serve([&](OwnedStream* s) {
    EXPECT_TRUE(WaitUntil([s] { return s->unread_bytes() > 0; }));
    owner = std::this_thread::get_id();
    s->CallWhenReadable([&] { ran_on = std::this_thread::get_id(); });
    EXPECT_EQ(ran_on, owner);
    Echo(s, grpc::Status::OK);
  });
  grpc::ClientContext context;
  auto stream = Call(&context);
  ASSERT_TRUE(stream->Write(BufferOf("x")));
  stream->WritesDone();
  EXPECT_EQ(ReadAll(stream.get()), (std::vector<std::string>{"x", "last"}));
  EXPECT_TRUE(stream->Finish().ok());
}

}  // namespace
}  // namespace shardmap
