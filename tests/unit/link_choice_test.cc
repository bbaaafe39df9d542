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
#include "tests/unit/link_worker.h"

namespace shardmap {
namespace {

// A worker that serves links only, and the coordinator's connector to it.
class LinkChoiceTest : public ::testing::Test {
 protected:
  absl::StatusOr<std::string> EchoInOneMessage(const std::string& data) {
    return shardmap::EchoInOneMessage(
        connector_.OpenSmall(worker_.address(),
                             absl::Now() + absl::Seconds(30)),
        data);
  }
  // Polls (bounded: 30 s) until the connector says the link is up.
  bool LinkComesUp(absl::Time deadline) {
    const absl::Time give_up = absl::Now() + absl::Seconds(30);
    while (!connector_.SmallReady(worker_.address(), deadline)) {
      if (absl::Now() >= give_up) return false;
      absl::SleepFor(absl::Milliseconds(1));
    }
    return true;
  }

  LinkWorker worker_;
  ChannelCache channels_;
  GrpcWorkerConnector connector_{&channels_};
};

TEST_F(LinkChoiceTest, ACallTheWorkerTakesInlineRunsOnTheThreadThatReadIt) {
  worker_.echo_inline = true;
  // Two in a row: the link reads on after the first.
  for (const std::string data : {"first", "second"}) {
    auto back = EchoInOneMessage(data);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, data);
  }
  absl::MutexLock lock(&worker_.mu);
  ASSERT_EQ(worker_.offer_threads.size(), 2u);
  ASSERT_EQ(worker_.run_threads.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(worker_.run_threads[i], worker_.offer_threads[i]) << i;
  }
}

TEST_F(LinkChoiceTest, ACallTheWorkerDeclinesRunsOnAPooledThread) {
  // echo_inline false: every offer declined.
  auto back = EchoInOneMessage("pooled");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, "pooled");
  absl::MutexLock lock(&worker_.mu);
  ASSERT_EQ(worker_.offer_threads.size(), 1u);
  ASSERT_EQ(worker_.run_threads.size(), 1u);
  EXPECT_NE(worker_.run_threads[0], worker_.offer_threads[0]);
}

TEST_F(LinkChoiceTest, ACallWhoseFirstMessageLeavesMoreToComeIsNotOffered) {
  worker_.echo_inline = true;
  auto back = Echo(connector_, worker_.address(), "in chunks");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, "in chunks");
  absl::MutexLock lock(&worker_.mu);
  EXPECT_TRUE(worker_.offer_threads.empty());
  EXPECT_EQ(worker_.run_threads.size(), 1u);
}

TEST_F(LinkChoiceTest, AskingWhetherALinkIsUpStartsOneForLaterCalls) {
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  EXPECT_FALSE(connector_.SmallReady(worker_.address(), deadline));
  ASSERT_TRUE(LinkComesUp(deadline));
  // The call after takes that link: still one.
  auto back = Echo(connector_, worker_.address(), "on the link");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, "on the link");
  EXPECT_EQ(worker_.links(), 1);
  // A call due after the link's life is never told a link is up.
  EXPECT_FALSE(
      connector_.SmallReady(worker_.address(), absl::Now() + absl::Hours(2)));
}

TEST_F(LinkChoiceTest, ACallThatMayNotWaitForItsLinkTakesAStreamOfItsOwn) {
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  // No link is up: the call goes on a RunShard stream at once (and fails
  // there, as this worker serves links only) instead of waiting for the
  // link.
  auto own = shardmap::EchoInOneMessage(
      connector_.OpenSmallIfUp(worker_.address(), deadline), "own");
  EXPECT_EQ(own.status().code(), absl::StatusCode::kUnimplemented)
      << own.status();
  // Meanwhile the link was started; once it is up, such calls take it.
  EXPECT_EQ(Eventually(worker_.links_started), 1);
  ASSERT_TRUE(LinkComesUp(deadline));
  auto linked = shardmap::EchoInOneMessage(
      connector_.OpenSmallIfUp(worker_.address(), deadline), "linked");
  ASSERT_TRUE(linked.ok()) << linked.status();
  EXPECT_EQ(*linked, "linked");
  EXPECT_EQ(worker_.links(), 1);
}

}  // namespace
}  // namespace shardmap
