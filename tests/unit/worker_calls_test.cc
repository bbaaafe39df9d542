// Tests of the coordinator's calls to workers over the ChannelCache
// (server/worker_calls, server/grpc_worker_connector), against a fake
// Worker service on 127.0.0.1:0: every call carries its caller's deadline,
// and an UNAVAILABLE the worker answers itself keeps the channel.
#include "server/worker_calls.h"

#include <gtest/gtest.h>

#include "rpc/channel_cache.h"
#include "server/grpc_worker_connector.h"
#include "tests/unit/fake_worker_server.h"

namespace shardmap {
namespace {

const grpc::Status kWorkersOwnUnavailable(grpc::StatusCode::UNAVAILABLE,
                                          "the worker is draining");

TEST(WorkerCallsTest, ACallEndsAtItsCallersDeadline) {
  FakeWorkerServer worker(grpc::Status::OK);  // SaveBlock never answers
  ChannelCache channels;
  WorkerCalls calls(&channels);
  auto digest = calls.SaveBlock(worker.address(), v1::SaveBlockRequest(),
                                absl::Now() + absl::Milliseconds(300));
  EXPECT_EQ(digest.status().code(), absl::StatusCode::kDeadlineExceeded)
      << digest.status();
}

TEST(WorkerCallsTest, TheWorkersOwnUnavailableKeepsTheChannel) {
  FakeWorkerServer worker(kWorkersOwnUnavailable);
  ChannelCache channels;
  WorkerCalls calls(&channels);
  std::shared_ptr<grpc::Channel> channel = channels.Get(worker.address());
  absl::Status s =
      calls.DropArray(worker.address(), "x", absl::Now() + absl::Seconds(20));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_EQ(channels.Get(worker.address()), channel);
}

TEST(GrpcWorkerConnectorTest, TheWorkersOwnUnavailableKeepsTheChannel) {
  FakeWorkerServer worker(kWorkersOwnUnavailable);
  ChannelCache channels;
  GrpcWorkerConnector connector(&channels);
  std::shared_ptr<grpc::Channel> channel = channels.Get(worker.address());
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  absl::Status s = connector.SkipTickets(worker.address(),
                                         v1::SkipTicketsRequest(), deadline);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_EQ(channels.Get(worker.address()), channel);
  // A job's stream the worker ends with its own UNAVAILABLE.
  std::unique_ptr<ShardChannel> job =
      connector.Open(worker.address(), deadline);
  job->Write(v1::ShardRequest());
  job->WritesDone();
  v1::ShardResponse response;
  while (job->Read(&response)) {
  }
  s = job->Finish();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_EQ(s.message(), "the worker is draining");
  EXPECT_EQ(channels.Get(worker.address()), channel);
}

TEST(GrpcWorkerConnectorTest, AnUnreachableWorkersChannelIsDialledAfresh) {
  FakeWorkerServer worker(grpc::Status::OK);
  const std::string address = worker.address();
  worker.Stop();
  ChannelCache channels;
  GrpcWorkerConnector connector(&channels);
  std::shared_ptr<grpc::Channel> channel = channels.Get(address);
  absl::Status s = connector.SkipTickets(address, v1::SkipTicketsRequest(),
                                         absl::Now() + absl::Seconds(20));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_NE(channels.Get(address), channel);
}

}  // namespace
}  // namespace shardmap
