// Tests of the choices around job links, end to end over gRPC on
// 127.0.0.1:0 against a worker that serves links only
// (tests/unit/link_worker.h): which calls the worker runs on the thread
// that read them (worker/inline_call.h), and how the coordinator's side
// starts links for later calls (ShardLinks::Prepare) and takes a stream
// of its own rather than wait for one (OpenSmallIfUp).
#include <gtest/gtest.h>

#include <string>

#include "rpc/channel_cache.h"
#include "server/grpc_worker_connector.h"
#include "tests/unit/fake_worker_server.h"
#include "tests/unit/link_worker.h"

namespace shardmap {
namespace {

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

TEST(LinkChoiceTest, ACallTheWorkerTakesInlineRunsOnTheThreadThatReadIt) {
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

TEST(LinkChoiceTest, ACallTheWorkerDeclinesRunsOnAPooledThread) {
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

TEST(LinkChoiceTest, ACallWhoseFirstMessageLeavesMoreToComeIsNotOffered) {
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

TEST(LinkChoiceTest, AskingWhetherALinkIsUpStartsOneForLaterCalls) {
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
  // A call due after the link's life is never told a link is up.
  EXPECT_FALSE(
      connector.SmallReady(worker.address(), absl::Now() + absl::Hours(2)));
}

TEST(LinkChoiceTest, ACallThatMayNotWaitForItsLinkTakesAStreamOfItsOwn) {
  LinkWorker worker;  // serves links only: RunShard is UNIMPLEMENTED
  ChannelCache channels;
  GrpcWorkerConnector connector(&channels);
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  // No link is up: the call goes on a RunShard stream at once (and fails
  // there, as this worker serves none) instead of waiting for the link.
  auto own = connector.OpenSmallIfUp(worker.address(), deadline);
  own->WriteLast(Job("echo"));
  v1::ShardResponse response;
  while (own->Read(&response)) {
  }
  EXPECT_EQ(own->Finish().code(), absl::StatusCode::kUnimplemented);
  // Meanwhile the link was started; once it is up, such calls take it.
  EXPECT_EQ(Eventually(worker.links_started), 1);
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (!connector.SmallReady(worker.address(), deadline) &&
         absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  auto on_link = connector.OpenSmallIfUp(worker.address(), deadline);
  v1::ShardRequest job = Job("echo");
  job.mutable_job()->add_chunks()->set_data("linked");
  ASSERT_TRUE(on_link->WriteLast(job));
  std::string back;
  while (on_link->Read(&response)) back += response.chunk().data();
  EXPECT_TRUE(on_link->Finish().ok());
  EXPECT_EQ(back, "linked");
  EXPECT_EQ(worker.links(), 1);
}

TEST(LinkChoiceTest, AWorkerWithoutLinksIsNeverUpAndStillGetsRunShardCalls) {
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

}  // namespace
}  // namespace shardmap
