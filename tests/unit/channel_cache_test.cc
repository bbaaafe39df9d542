// Tests of rpc/channel_cache: one channel per address, reused by every
// stub; eviction by Evict and by a transport failure (never by an
// UNAVAILABLE the peer answered itself); concurrent Get dials once. Only
// lazy channels (no network) or servers on 127.0.0.1:0.
#include "rpc/channel_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "rpc/channel.h"
#include "rpc/grpc_status.h"
#include "shardmap/v1/shm.grpc.pb.h"
#include "shardmap/v1/worker.grpc.pb.h"
#include "tests/unit/fake_worker_server.h"

namespace shardmap {
namespace {

// A dial that counts, on lazy channels (nothing connects until a call).
struct CountingDial {
  std::shared_ptr<std::atomic<int>> dials =
      std::make_shared<std::atomic<int>>(0);
  ChannelCache::Dial dial() {
    return [d = dials](const std::string& address) {
      ++*d;
      return MakeChannel(address);
    };
  }
};

// Drops one DropArray call to `address` through `cache`, reports how it
// ended and returns its status.
absl::Status DropThrough(ChannelCache& cache, const std::string& address) {
  std::shared_ptr<grpc::Channel> channel;
  auto stub = cache.Stub<v1::Worker>(address, &channel);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
  v1::DropArrayRequest request;
  v1::DropArrayResponse response;
  absl::Status s =
      FromGrpcStatus(stub->DropArray(&context, request, &response));
  cache.OnCallEnded(address, channel, s);
  return s;
}

TEST(ChannelCacheTest, OneChannelPerAddressSharedByItsStubs) {
  CountingDial counting;
  ChannelCache cache(counting.dial());
  std::shared_ptr<grpc::Channel> a = cache.Get("127.0.0.1:1");
  EXPECT_EQ(cache.Get("127.0.0.1:1"), a);
  EXPECT_NE(cache.Get("127.0.0.1:2"), a);
  EXPECT_EQ(*counting.dials, 2);
  std::shared_ptr<grpc::Channel> on;
  auto worker = cache.Stub<v1::Worker>("127.0.0.1:1", &on);
  EXPECT_EQ(on, a);
  EXPECT_EQ(cache.Stub<v1::Worker>("127.0.0.1:1"), worker);
  // Another service's stub, on the same channel.
  on.reset();
  ASSERT_NE(cache.Stub<v1::ShmPeer>("127.0.0.1:1", &on), nullptr);
  EXPECT_EQ(on, a);
  EXPECT_EQ(*counting.dials, 2);
  EXPECT_EQ(cache.size(), 2u);
}

TEST(ChannelCacheTest, EvictDialsAfresh) {
  CountingDial counting;
  ChannelCache cache(counting.dial());
  std::shared_ptr<grpc::Channel> old = cache.Get("127.0.0.1:1");
  auto old_stub = cache.Stub<v1::Worker>("127.0.0.1:1");
  cache.Evict("127.0.0.1:1");
  cache.Evict("127.0.0.1:9");  // never dialled: nothing happens
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_NE(cache.Get("127.0.0.1:1"), old);
  EXPECT_NE(cache.Stub<v1::Worker>("127.0.0.1:1"), old_stub);
  EXPECT_EQ(*counting.dials, 2);
}

TEST(ChannelCacheTest, OnlyATransportFailureOfTheCachedChannelEvicts) {
  ChannelCache cache;
  const std::string address = "127.0.0.1:1";
  std::shared_ptr<grpc::Channel> old = cache.Get(address);
  // Other codes never evict.
  EXPECT_FALSE(cache.OnCallEnded(address, old, absl::InternalError("x")));
  EXPECT_FALSE(cache.OnCallEnded(address, old, absl::OkStatus()));
  EXPECT_EQ(cache.Get(address), old);
  // A report about a channel already replaced leaves the new one alone.
  cache.Evict(address);
  std::shared_ptr<grpc::Channel> current = cache.Get(address);
  EXPECT_FALSE(cache.OnCallEnded(address, old, absl::UnavailableError("x")));
  EXPECT_EQ(cache.Get(address), current);
}

TEST(ChannelCacheTest, KeepsTheChannelWhenThePeerAnswersUnavailable) {
  FakeWorkerServer worker(
      grpc::Status(grpc::StatusCode::UNAVAILABLE, "a peer of mine is gone"));
  ChannelCache cache;
  std::shared_ptr<grpc::Channel> channel = cache.Get(worker.address());
  absl::Status s = DropThrough(cache, worker.address());
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_EQ(s.message(), "a peer of mine is gone");
  EXPECT_EQ(cache.Get(worker.address()), channel);
}

TEST(ChannelCacheTest, EvictsTheChannelWhenTheTransportFails) {
  FakeWorkerServer worker(grpc::Status::OK);
  const std::string address = worker.address();
  worker.Stop();  // the port closes: no call can connect
  ChannelCache cache;
  std::shared_ptr<grpc::Channel> channel = cache.Get(address);
  absl::Status s = DropThrough(cache, address);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_NE(cache.Get(address), channel);
}

TEST(ChannelCacheTest, ConcurrentGetsOfOneAddressDialOnce) {
  CountingDial counting;
  ChannelCache cache(counting.dial());
  constexpr int kThreads = 8;
  std::vector<std::shared_ptr<grpc::Channel>> got(kThreads);
  std::vector<std::shared_ptr<v1::Worker::Stub>> stubs(kThreads);
  absl::Notification go;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      go.WaitForNotification();
      stubs[t] = cache.Stub<v1::Worker>("127.0.0.1:1", &got[t]);
      // Another address in between, to mix the map's writers.
      cache.Get(absl::StrCat("127.0.0.1:", 100 + t));
    });
  }
  go.Notify();
  for (auto& t : threads) t.join();
  for (int t = 1; t < kThreads; ++t) {
    EXPECT_EQ(got[t], got[0]);
    EXPECT_EQ(stubs[t], stubs[0]);
  }
  EXPECT_EQ(*counting.dials, 1 + kThreads);
  EXPECT_EQ(cache.size(), 1u + kThreads);
}

}  // namespace
}  // namespace shardmap
