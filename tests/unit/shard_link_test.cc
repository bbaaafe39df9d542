// Tests of the job link (Worker.RunShards) end to end over gRPC on
// 127.0.0.1:0: the coordinator's side (server/shard_link, link_call)
// against the worker's (worker/shard_link_service) with a scripted call
// body in place of the worker's job code (tests/unit/link_worker.h). Calls
// share one stream, each gets its own responses and status, cancels and
// deadlines reach the worker, a worker that serves no links gets RunShard
// calls, and a worker that goes away fails its calls instead of hanging them.
#include "server/shard_link.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "rpc/channel_cache.h"
#include "rpc/trace_context.h"
#include "server/grpc_worker_connector.h"
#include "tests/unit/fake_worker_server.h"
#include "tests/unit/link_worker.h"

namespace shardmap {
namespace {

TEST(ShardLinkTest, ConcurrentCallsShareOneStreamAndGetTheirOwnAnswers) {
  LinkWorker worker;
  ChannelCache channels;
  GrpcWorkerConnector connector(&channels);
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) {
        const std::string data =
            std::string(100 + 37 * i, static_cast<char>('a' + t)) +
            absl::StrCat(t, "/", i);
        auto back = Echo(connector, worker.address(), data);
        if (!back.ok() || *back != data) ++wrong;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(worker.links(), 1);
}

TEST(ShardLinkTest, TheWorkersErrorIsTheCallsStatus) {
  LinkWorker worker;
  ChannelCache channels;
  GrpcWorkerConnector connector(&channels);
  auto ch =
      connector.OpenSmall(worker.address(), absl::Now() + absl::Seconds(30));
  ASSERT_TRUE(ch->WriteLast(Job("fail")));
  v1::ShardResponse response;
  EXPECT_FALSE(ch->Read(&response));
  absl::Status s = ch->Finish();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(s.message(), "argument x: scripted failure");
  // The link is still good for the next call.
  auto back = Echo(connector, worker.address(), "still here");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, "still here");
  EXPECT_EQ(worker.links(), 1);
}

TEST(ShardLinkTest, CancelEndsTheCallHereAndReachesTheWorker) {
  LinkWorker worker;
  ChannelCache channels;
  GrpcWorkerConnector connector(&channels);
  auto ch = StartWaitingCall(connector, worker);
  std::thread canceller([&] { ch->Cancel(); });
  v1::ShardResponse response;
  EXPECT_FALSE(ch->Read(&response));
  canceller.join();
  EXPECT_EQ(ch->Finish().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(Eventually(worker.saw_cancel), 1);
}

// Both sides end the call at its deadline (the worker learns it from the
// call's first message).
TEST(ShardLinkTest, ACallEndsAtItsDeadlineOnBothSides) {
  LinkWorker worker;
  ChannelCache channels;
  GrpcWorkerConnector connector(&channels);
  ASSERT_TRUE(Echo(connector, worker.address(), "warm").ok());  // link up
  auto ch = connector.OpenSmall(worker.address(),
                                absl::Now() + absl::Milliseconds(300));
  ASSERT_TRUE(ch->WriteLast(Job("wait")));
  v1::ShardResponse response;
  EXPECT_FALSE(ch->Read(&response));
  EXPECT_EQ(ch->Finish().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(Eventually(worker.saw_cancel), 1);
}

// A call to a link worker for a caller reading several calls as their
// answers come (the serial fan-out): its channel notifies `signal`.
struct SignalledCall {
  LinkWorker worker;
  ChannelCache channels;
  GrpcWorkerConnector connector{&channels};
  ChangeSignal signal;  // outlives the channels a test opens after it
  std::unique_ptr<ShardChannel> Open() {
    auto ch =
        connector.OpenSmall(worker.address(), absl::Now() + absl::Seconds(60));
    ch->SetReadableSignal(&signal);
    return ch;
  }
};

// The call says when its answer is in, and notifies the caller's signal.
TEST(ShardLinkTest, ACallSaysWhenItsAnswerIsInAndNotifiesTheSignal) {
  SignalledCall call;
  ChangeSignal& signal = call.signal;
  auto ch = call.Open();
  const uint64_t seen = signal.generation();
  ASSERT_TRUE(ch->Write(Job("echo")));
  ASSERT_TRUE(ch->WriteLast(Chunk("abc")));
  ASSERT_TRUE(signal.WaitChanged(seen, absl::Now() + absl::Seconds(30)));
  EXPECT_TRUE(ch->Readable());
  auto back = ReadAll(*ch);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, "abc");
}

// The call says when its whole answer is in, its end with it.
TEST(ShardLinkTest, ACallSaysWhenItsWholeAnswerIsIn) {
  SignalledCall call;
  auto ch = call.Open();
  ASSERT_TRUE(ch->Write(Job("echo")));
  ASSERT_TRUE(ch->WriteLast(Chunk("abc")));
  // Bounded: the end follows the answer within moments.
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  for (uint64_t seen = call.signal.generation();
       !ch->Complete() && absl::Now() < give_up;
       seen = call.signal.generation()) {
    call.signal.WaitChanged(seen, give_up);
  }
  ASSERT_TRUE(ch->Complete());
  EXPECT_TRUE(ch->Readable());
  auto back = ReadAll(*ch);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, "abc");
}

TEST(ShardLinkTest, AWaitingCallIsNotReadableUntilCancelled) {
  SignalledCall call;
  ChangeSignal& signal = call.signal;
  auto ch = call.Open();
  ASSERT_TRUE(ch->WriteLast(Job("wait")));
  ASSERT_EQ(Eventually(call.worker.running), 1);
  EXPECT_FALSE(ch->Readable());
  EXPECT_FALSE(ch->Complete());
  const uint64_t seen = signal.generation();
  ch->Cancel();
  EXPECT_TRUE(signal.WaitChanged(seen, absl::Now() + absl::Seconds(30)));
  EXPECT_TRUE(ch->Readable());
  EXPECT_TRUE(ch->Complete());  // cancelled: nothing more will come
  v1::ShardResponse response;
  EXPECT_FALSE(ch->Read(&response));
  EXPECT_EQ(ch->Finish().code(), absl::StatusCode::kCancelled);
}

TEST(ShardLinkTest, TheCallersTraceReachesTheWorker) {
  LinkWorker worker;
  ChannelCache channels;
  GrpcWorkerConnector connector(&channels);
  const Traceparent trace = Traceparent::New();
  {
    ScopedLogContext in_job({"job-1", trace.trace_id, trace.span_id});
    ASSERT_TRUE(Echo(connector, worker.address(), "traced").ok());
  }
  absl::MutexLock lock(&worker.mu);
  ASSERT_EQ(worker.traces.size(), 1u);
  EXPECT_EQ(worker.traces[0], trace.ToString());
}

TEST(ShardLinkTest, ACallWithoutATimeoutIsRefused) {
  LinkWorker worker;
  auto channel =
      grpc::CreateChannel(worker.address(), grpc::InsecureChannelCredentials());
  auto stub = v1::Worker::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(30));
  auto stream = stub->RunShards(&context);
  v1::ShardLinkRequest first;
  first.set_call(5);
  *first.mutable_request() = Job("echo");  // no timeout_ms
  ASSERT_TRUE(stream->Write(first));
  v1::ShardLinkResponse response;
  ASSERT_TRUE(stream->Read(&response));  // call 0: the worker serves links
  EXPECT_EQ(response.call(), 0u);
  ASSERT_TRUE(stream->Read(&response));
  EXPECT_EQ(response.call(), 5u);
  EXPECT_TRUE(response.end());
  EXPECT_EQ(response.code(),
            static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_NE(response.message().find("timeout_ms"), std::string::npos)
      << response.message();
  {
    absl::MutexLock lock(&worker.mu);
    EXPECT_TRUE(worker.traces.empty());  // the call never ran
  }
  context.TryCancel();
}

TEST(ShardLinkTest, AWorkerWithoutLinksGetsRunShardCalls) {
  // Its Worker service predates RunShards: every RunShard call it answers
  // with this status.
  FakeWorkerServer worker(
      grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "old worker"));
  ChannelCache channels;
  GrpcWorkerConnector connector(&channels);
  for (int i = 0; i < 3; ++i) {
    // Never told a link is up (asking starts one, which fails).
    EXPECT_FALSE(connector.SmallReady(worker.address(),
                                      absl::Now() + absl::Seconds(30)));
    auto back = EchoInOneMessage(
        connector.OpenSmall(worker.address(), absl::Now() + absl::Seconds(30)),
        "old");
    EXPECT_EQ(back.status().code(), absl::StatusCode::kFailedPrecondition)
        << back.status();
    EXPECT_EQ(back.status().message(), "old worker");
  }
}

TEST(ShardLinkTest, AWorkerThatGoesAwayFailsItsCalls) {
  LinkWorker worker;
  ChannelCache channels;
  GrpcWorkerConnector connector(&channels);
  auto ch = StartWaitingCall(connector, worker);
  std::thread stop([&] { worker.Stop(); });
  v1::ShardResponse response;
  EXPECT_FALSE(ch->Read(&response));
  const absl::Status s = ch->Finish();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  stop.join();
}

}  // namespace
}  // namespace shardmap
