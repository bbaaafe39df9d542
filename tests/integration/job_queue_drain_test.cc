// The coordinator's SIGTERM drain with jobs waiting for a turn: they are
// turned away at once with UNAVAILABLE ("never started"), while the job
// running finishes. A binary of its own: Coordinator::Drain arms the
// process's shutdown-hang guard, which would end a longer test binary.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "client/shard_client.h"
#include "tests/integration/job_queue_util.h"
#include "tests/integration/test_cluster.h"
#include "tests/unit/wait_until.h"

namespace shardmap {
namespace {

// A cluster of its own: the drain stops its coordinator.
TEST(JobQueueDrainTest, ADrainTurnsTheWaitingAwayAndLetsTheRunningFinish) {
  TestCluster cluster(OneJobAtATime());
  auto client = *ShardClient::Create({cluster.address()});
  RawJob holder(cluster.address(), absl::Seconds(30));
  ASSERT_TRUE(WaitForJobs(*client, 1, 0));
  RawJob waiting(cluster.address(), absl::Seconds(30));
  ASSERT_TRUE(WaitForJobs(*client, 1, 1));

  std::thread drain([&] { cluster.DrainCoordinator(); });
  // Turned away at once, though the running job holds the drain: it never
  // started, so its client may safely send it again.
  const grpc::Status w = waiting.Drain(nullptr);
  EXPECT_EQ(w.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(w.error_message().find("never started"), std::string::npos)
      << w.error_message();
  EXPECT_TRUE(holder.CompletesAsIdentity());
  drain.join();
}

}  // namespace
}  // namespace shardmap
