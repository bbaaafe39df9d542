// Tests of the job link (Worker.RunShards) end to end over gRPC on
// 127.0.0.1:0: the coordinator's side (server/shard_link) against the
// worker's (worker/shard_link_service) with a scripted call body in place
// of the worker's job code. Calls share one stream, each gets its own
// responses and status, cancels and deadlines reach the worker, a worker
// that serves no links gets RunShard calls, and a worker that goes away
// fails its calls instead of hanging them.
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
#include "worker/shard_link_service.h"

namespace shardmap {
namespace {

// A worker that serves links only. A call's job names what it does:
// "echo" returns the bytes of its chunks as one output chunk; "fail"
// fails; "wait" waits until the call is cancelled (bounded).
class LinkWorker {
 public:
  LinkWorker() : service_(this) {
    server_ = StartLocalServer(&service_, &address_);
  }
  ~LinkWorker() { Stop(); }
  void Stop() {
    if (server_) server_->Shutdown(std::chrono::system_clock::now());
    server_.reset();
  }

  const std::string& address() const { return address_; }
  int links() const { return links_.load(); }
  std::atomic<int> saw_cancel{0};
  std::atomic<int> running{0};
  // Echo calls may run inline (ShardLinkReactor::RunsInline).
  std::atomic<bool> echo_inline{false};
  absl::Mutex mu;
  std::vector<std::string> traces ABSL_GUARDED_BY(mu);
  // The threads calls were offered to RunsInline on, and echo calls ran on.
  std::vector<std::thread::id> offer_threads ABSL_GUARDED_BY(mu);
  std::vector<std::thread::id> run_threads ABSL_GUARDED_BY(mu);

 private:
  absl::Status Run(ShardStream* stream, absl::Time deadline,
                   const std::string& trace) {
    {
      absl::MutexLock lock(&mu);
      traces.push_back(trace);
    }
    v1::ShardRequest request;
    if (!stream->Read(&request) || !request.has_job()) {
      return absl::InternalError("no job header");
    }
    const std::string what = request.job().function();
    if (what == "fail") {
      return absl::InvalidArgumentError("argument x: scripted failure");
    }
    if (what == "wait") {
      ++running;
      while (!stream->cancelled() &&
             absl::Now() < deadline + absl::Seconds(5)) {
        absl::SleepFor(absl::Milliseconds(2));
      }
      if (stream->cancelled()) ++saw_cancel;
      return absl::CancelledError("cancelled");
    }
    {
      absl::MutexLock lock(&mu);
      run_threads.push_back(std::this_thread::get_id());
    }
    std::string bytes;
    for (const v1::ArrayChunk& c : request.job().chunks()) bytes += c.data();
    while (stream->Read(&request)) bytes += request.chunk().data();
    v1::ShardResponse outputs;
    outputs.mutable_outputs();
    if (!stream->Write(outputs)) return absl::CancelledError("gone");
    v1::ShardResponse chunk;
    chunk.mutable_chunk()->set_data(bytes);
    stream->WriteLast(chunk);
    return absl::OkStatus();
  }

  class Service final
      : public v1::Worker::WithCallbackMethod_RunShards<v1::Worker::Service> {
   public:
    explicit Service(LinkWorker* worker) : worker_(worker) {}
    grpc::ServerBidiReactor<v1::ShardLinkRequest, v1::ShardLinkResponse>*
    RunShards(grpc::CallbackServerContext*) override {
      ++worker_->links_;
      return new ShardLinkReactor(
          &worker_->threads_, nullptr,
          [w = worker_](ShardStream* s, absl::Time d, const std::string& t) {
            return w->Run(s, d, t);
          },
          [w = worker_](const v1::ShardRequest& first) {
            absl::MutexLock lock(&w->mu);
            w->offer_threads.push_back(std::this_thread::get_id());
            return w->echo_inline.load() && first.job().function() == "echo";
          });
    }

   private:
    LinkWorker* const worker_;
  };

  DeviceThreads threads_;  // outlives the server's reactors
  std::atomic<int> links_{0};
  Service service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

v1::ShardRequest Job(const std::string& what) {
  v1::ShardRequest r;
  r.mutable_job()->set_function(what);
  return r;
}

v1::ShardRequest Chunk(const std::string& data) {
  v1::ShardRequest r;
  r.mutable_chunk()->set_data(data);
  return r;
}

// Waits (bounded: 30 s) until `count` is at least 1; its value then.
int Eventually(const std::atomic<int>& count) {
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (count.load() == 0 && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  return count.load();
}

// Opens a small call to `worker` that waits until it is cancelled, and
// returns it once the worker runs it.
std::unique_ptr<ShardChannel> StartWaitingCall(WorkerConnector& connector,
                                               LinkWorker& worker) {
  auto ch =
      connector.OpenSmall(worker.address(), absl::Now() + absl::Seconds(60));
  EXPECT_TRUE(ch->WriteLast(Job("wait")));
  EXPECT_EQ(Eventually(worker.running), 1);
  return ch;
}

// Runs an echo call of `data` (in two chunks); returns what came back.
absl::StatusOr<std::string> Echo(WorkerConnector& connector,
                                 const std::string& address,
                                 const std::string& data) {
  auto ch = connector.OpenSmall(address, absl::Now() + absl::Seconds(30));
  const size_t half = data.size() / 2;
  if (!ch->Write(Job("echo")) || !ch->Write(Chunk(data.substr(0, half))) ||
      !ch->WriteLast(Chunk(data.substr(half)))) {
    return ch->Finish();
  }
  std::string back;
  v1::ShardResponse response;
  int outputs = 0;
  while (ch->Read(&response)) {
    if (response.has_outputs()) ++outputs;
    back += response.chunk().data();
  }
  absl::Status s = ch->Finish();
  if (!s.ok()) return s;
  if (outputs != 1) return absl::InternalError("expected one ShardOutputs");
  return back;
}

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
  std::string back;
  v1::ShardResponse response;
  while (ch->Read(&response)) back += response.chunk().data();
  EXPECT_EQ(back, "abc");
  EXPECT_TRUE(ch->Finish().ok());
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
  std::string back;
  v1::ShardResponse response;
  while (ch->Read(&response)) back += response.chunk().data();
  EXPECT_EQ(back, "abc");
  EXPECT_TRUE(ch->Finish().ok());
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
  for (int i = 0; i < 2; ++i) {
    auto ch =
        connector.OpenSmall(worker.address(), absl::Now() + absl::Seconds(30));
    ch->WriteLast(Job("echo"));
    v1::ShardResponse response;
    while (ch->Read(&response)) {
    }
    absl::Status s = ch->Finish();
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_EQ(s.message(), "old worker");
  }
}

// An echo call whose header carries its data and ends its half; what came
// back.
absl::StatusOr<std::string> EchoInOneMessage(WorkerConnector& connector,
                                             const std::string& address,
                                             const std::string& data) {
  auto ch = connector.OpenSmall(address, absl::Now() + absl::Seconds(30));
  v1::ShardRequest job = Job("echo");
  job.mutable_job()->add_chunks()->set_data(data);
  if (!ch->WriteLast(job)) return ch->Finish();
  std::string back;
  v1::ShardResponse response;
  while (ch->Read(&response)) back += response.chunk().data();
  absl::Status s = ch->Finish();
  if (!s.ok()) return s;
  return back;
}

TEST(ShardLinkTest, ACallTheWorkerTakesInlineRunsOnTheThreadThatReadIt) {
  LinkWorker worker;
  worker.echo_inline = true;
  ChannelCache channels;
  GrpcWorkerConnector connector(&channels);
  // Two in a row: the link reads on after the first.
  for (const std::string data : {"first", "second"}) {
    auto back = EchoInOneMessage(connector, worker.address(), data);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, data);
  }
  absl::MutexLock lock(&worker.mu);
  ASSERT_EQ(worker.offer_threads.size(), 2u);
  ASSERT_EQ(worker.run_threads.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(worker.run_threads[i], worker.offer_threads[i]) << i;
  }
}

TEST(ShardLinkTest, ACallTheWorkerDeclinesRunsOnAPooledThread) {
  LinkWorker worker;  // echo_inline false: every offer declined
  ChannelCache channels;
  GrpcWorkerConnector connector(&channels);
  auto back = EchoInOneMessage(connector, worker.address(), "pooled");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, "pooled");
  absl::MutexLock lock(&worker.mu);
  ASSERT_EQ(worker.offer_threads.size(), 1u);
  ASSERT_EQ(worker.run_threads.size(), 1u);
  EXPECT_NE(worker.run_threads[0], worker.offer_threads[0]);
}

TEST(ShardLinkTest, ACallWhoseFirstMessageLeavesMoreToComeIsNotOffered) {
  LinkWorker worker;
  worker.echo_inline = true;
  ChannelCache channels;
  GrpcWorkerConnector connector(&channels);
  auto back = Echo(connector, worker.address(), "in chunks");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, "in chunks");
  absl::MutexLock lock(&worker.mu);
  EXPECT_TRUE(worker.offer_threads.empty());
  EXPECT_EQ(worker.run_threads.size(), 1u);
}

TEST(ShardLinkTest, AskingWhetherALinkIsUpStartsOneForLaterCalls) {
  LinkWorker worker;
  ChannelCache channels;
  GrpcWorkerConnector connector(&channels);
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  EXPECT_FALSE(connector.SmallReady(worker.address(), deadline));
  // Bounded: the link comes up within moments.
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (!connector.SmallReady(worker.address(), deadline) &&
         absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_TRUE(connector.SmallReady(worker.address(), deadline));
  // The call after takes that link: still one.
  auto back = Echo(connector, worker.address(), "on the link");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, "on the link");
  EXPECT_EQ(worker.links(), 1);
  // A call due after the link's life is never told a link is up (nor gets
  // one started).
  EXPECT_FALSE(
      connector.SmallReady(worker.address(), absl::Now() + absl::Hours(2)));
  EXPECT_EQ(worker.links(), 1);
}

TEST(ShardLinkTest, AWorkerWithoutLinksIsNeverUpAndStillGetsRunShardCalls) {
  FakeWorkerServer worker(
      grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "old worker"));
  ChannelCache channels;
  GrpcWorkerConnector connector(&channels);
  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(connector.SmallReady(worker.address(),
                                      absl::Now() + absl::Seconds(30)));
    auto ch =
        connector.OpenSmall(worker.address(), absl::Now() + absl::Seconds(30));
    ch->WriteLast(Job("echo"));
    v1::ShardResponse response;
    while (ch->Read(&response)) {
    }
    EXPECT_EQ(ch->Finish().message(), "old worker");
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
