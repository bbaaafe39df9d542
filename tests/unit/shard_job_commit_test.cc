// Tests of worker/shard_job's ends: a failed function, the two-phase
// decision (commit, abort, the stream ending, a cancel), a coordinator gone
// while outputs go out, and a commit the disk refuses.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "tests/unit/shard_job_fixture.h"

namespace shardmap {
namespace {

namespace fs = std::filesystem;

TEST_F(ShardJobTest, AFailedFunctionReturnsItsErrorAndStoresNothing) {
  FakeShardStream stream;
  SendStoringJob(stream, "refuse");
  Decide(stream, true);
  EXPECT_TRUE(StatusIs(RunJob(stream), absl::StatusCode::kFailedPrecondition,
                       {"refuse: not today"}));
  EXPECT_TRUE(stream.written().empty());
  ExpectNothingStored();
}

TEST_F(ShardJobTest, ACommitStoresTheWritesOnlyWhenDecided) {
  FakeShardStream stream;
  const std::vector<float> x = {3, 4};
  v1::ShardJob header = Header("job-a", 0, x);
  StoreOutput(&header, "r");
  Send(stream, header, x);
  absl::Status status;
  std::thread t([&] { status = RunJob(stream); });
  // The outputs went out; the writes wait for the decision.
  ASSERT_TRUE(WaitUntil([&] { return !stream.written().empty(); }));
  EXPECT_FALSE(Holds("r", 1, PlusOne(x)));
  Decide(stream, true);
  t.join();
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_TRUE(Holds("r", 1, PlusOne(x)));
  EXPECT_EQ(stream.written().at(0).outputs().digests_size(), 1);
}

TEST_F(ShardJobTest, AnAbortStoresNothing) {
  FakeShardStream stream;
  SendStoringJob(stream);
  Decide(stream, false);
  EXPECT_TRUE(RunJob(stream).ok());
  ExpectNothingStored();
}

TEST_F(ShardJobTest, AStreamEndingBeforeTheDecisionAborts) {
  FakeShardStream stream;
  SendStoringJob(stream);
  stream.Close();
  EXPECT_TRUE(RunJob(stream).ok());
  ExpectNothingStored();
}

TEST_F(ShardJobTest, ACancelWhileWaitingForTheDecisionAborts) {
  FakeShardStream stream;
  SendStoringJob(stream);
  absl::Status status;
  std::thread t([&] { status = RunJob(stream); });
  ASSERT_TRUE(WaitUntil([&] { return !stream.written().empty(); }));
  stream.Cancel();
  t.join();
  ExpectNothingStored();
}

TEST_F(ShardJobTest, ACancelBeforeTheOutputsGoOutSendsNothing) {
  FakeShardStream stream;
  SendStoringJob(stream);
  Decide(stream, true);
  // Cancelled once the function has run.
  stream.set_on_cancelled_check([this] { return runs_ > 0; });
  EXPECT_TRUE(StatusIs(RunJob(stream), absl::StatusCode::kCancelled,
                       {"job cancelled"}));
  EXPECT_TRUE(stream.written().empty());
  ExpectNothingStored();
}

TEST_F(ShardJobTest, ACoordinatorGoneWhileSendingEndsTheJob) {
  FakeShardStream stream;
  Send(stream, Header("job-a", 0, {3}), {3});
  stream.FailWritesFrom(1);  // the headers go, the chunk does not
  EXPECT_TRUE(StatusIs(RunJob(stream), absl::StatusCode::kCancelled,
                       {"coordinator went away"}));
  // A job that stores its output: its staged write is dropped.
  FakeShardStream storing;
  SendStoringJob(storing, "add_one", "job-b", 1);
  Decide(storing, true);
  storing.FailWritesFrom(0);
  EXPECT_TRUE(StatusIs(RunJob(storing), absl::StatusCode::kCancelled,
                       {"coordinator went away"}));
  ExpectNothingStored("job-b");
}

TEST_F(ShardJobTest, ACommitThatCannotBePersistedFailsTheJob) {
  TempDir tmp("shard_job_test");
  // "r"'s directory cannot be made: a file stands where it would go.
  fs::create_directories(fs::path(tmp.path()) / "arrays");
  std::ofstream(fs::path(tmp.path()) / "arrays" / "r") << "in the way";
  ResidentStore disk_store(tmp.path());
  store_ = &disk_store;
  FakeShardStream stream;
  SendStoringJob(stream);
  Decide(stream, true);
  const std::string dir = (fs::path(tmp.path()) / "arrays" / "r").string();
  EXPECT_TRUE(StatusIs(RunJob(stream), absl::StatusCode::kInternal,
                       {"device 0 cannot keep the job's writes",
                        "cannot create directory " + dir}));
  EXPECT_TRUE(disk_store.All().empty());
}

}  // namespace
}  // namespace shardmap
