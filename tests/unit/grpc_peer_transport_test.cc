// The gRPC peer transport over real loopback streams: devices of one job
// are threads of this process, on one or two in-process worker servers.
// Covers sending without a copy (Lend: the buffer goes to gRPC as it is and
// comes back by Settle, also when the peer is gone), receiving the slices
// as they arrived (RecvChunks), and the ring all-reduce over both against
// a plain sum.
#include "worker/transport/grpc/grpc_peer_transport.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "rpc/channel.h"
#include "rpc/channel_cache.h"
#include "tests/unit/status_matchers.h"
#include "worker/collectives/all_reduce.h"
#include "worker/transport/grpc/lent_slices.h"
#include "worker/transport/grpc/peer_service.h"

namespace shardmap {
namespace {

struct Worker {
  ChannelCache channels;
  std::unique_ptr<PeerNetwork> network;
  std::unique_ptr<PeerService> service;
  std::unique_ptr<grpc::Server> server;
  std::string address;
};

std::unique_ptr<Worker> StartWorker(uint64_t incarnation) {
  auto w = std::make_unique<Worker>();
  w->network = std::make_unique<PeerNetwork>(
      PeerNetwork::Options{"", incarnation}, &w->channels);
  w->service = std::make_unique<PeerService>(w->network->inbox());
  grpc::ServerBuilder b;
  int port = 0;
  b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  ConfigureServerBuilder(b);
  b.RegisterCallbackGenericService(w->service.get());
  w->server = b.BuildAndStart();
  EXPECT_NE(port, 0);
  w->address = absl::StrCat("127.0.0.1:", port);
  w->network->set_my_address(w->address);
  return w;
}

// Cancels the streams still open (peer links live as long as their
// network) and waits for the server to finish.
void Stop(Worker& w) {
  w.server->Shutdown(std::chrono::system_clock::now());
  w.server->Wait();
}

GrpcPeerTransport::Options JobOn(const std::string& job, int64_t device,
                                 std::vector<std::string> addresses) {
  GrpcPeerTransport::Options o;
  o.job_id = job;
  o.device = device;
  o.addresses = std::move(addresses);
  o.deadline = absl::Now() + absl::Seconds(60);
  o.collective_timeout = absl::Seconds(30);
  return o;
}

std::vector<uint8_t> RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> out(n);
  for (uint8_t& b : out) b = static_cast<uint8_t>(rng());
  return out;
}

const Fingerprint kPrint{42, "test(float32[...])"};

TEST(LentSlicesTest, CountsASliceUntilItsLastReferenceIsDropped) {
  std::vector<uint8_t> data = RandomBytes(1000, 1);
  LentSlices lent;
  {
    grpc::Slice slice = lent.Lend(data);
    // Not a copy: the slice is the caller's memory.
    EXPECT_EQ(slice.begin(), data.data());
    EXPECT_EQ(slice.size(), data.size());
    EXPECT_EQ(lent.outstanding(), 1);
    grpc::ByteBuffer buffer(&slice, 1);
    grpc::Slice copy = slice;
    slice = grpc::Slice();
    EXPECT_EQ(lent.outstanding(), 1);  // `copy` and `buffer` still hold it
    buffer.Clear();
    EXPECT_EQ(lent.outstanding(), 1);
  }
  EXPECT_EQ(lent.outstanding(), 0);
  EXPECT_TRUE(
      lent.AwaitReleased(absl::Now(), [] { return absl::OkStatus(); }).ok());
}

TEST(LentSlicesTest, AwaitStopsAtTheDeadlineOrTheAbortWhileASliceIsHeld) {
  std::vector<uint8_t> data(16);
  LentSlices lent;
  grpc::Slice held = lent.Lend(data);
  EXPECT_TRUE(
      StatusIs(lent.AwaitReleased(absl::Now(), [] { return absl::OkStatus(); }),
               absl::StatusCode::kDeadlineExceeded, {"lent"}));
  EXPECT_TRUE(StatusIs(
      lent.AwaitReleased(absl::InfiniteFuture(),
                         [] { return absl::AbortedError("job aborted"); }),
      absl::StatusCode::kAborted, {"job aborted"}));
}

TEST(LentSlicesTest, ASliceMayOutliveItsCounter) {
  std::vector<uint8_t> data(16);
  grpc::Slice held;
  {
    LentSlices lent;
    held = lent.Lend(data);
  }
  held = grpc::Slice();  // releases into the counter the slice kept alive
}

class GrpcPeerTransportTest : public ::testing::Test {
 protected:
  void SetUp() override { worker_ = StartWorker(1); }
  void TearDown() override { Stop(*worker_); }
  std::vector<std::string> Addresses(int n) const {
    return std::vector<std::string>(n, worker_->address);
  }
  std::unique_ptr<Worker> worker_;
};

TEST_F(GrpcPeerTransportTest, ALentBufferArrivesAndComesBackBySettle) {
  GrpcPeerTransport t0(worker_->network.get(), JobOn("lend", 0, Addresses(2)));
  GrpcPeerTransport t1(worker_->network.get(), JobOn("lend", 1, Addresses(2)));
  // Three frames of at most 1 MiB, the last short.
  const std::vector<uint8_t> data = RandomBytes((5 << 19) + 3, 2);
  const PeerMessage message{0, 0, &kPrint};
  ASSERT_TRUE(t0.Lend(1, message, data).ok());
  std::vector<uint8_t> got(data.size());
  ASSERT_TRUE(t1.Recv(0, message, absl::MakeSpan(got)).ok());
  EXPECT_EQ(got, data);
  ASSERT_TRUE(t0.Settle(/*abandon=*/false).ok());
  EXPECT_EQ(t0.lent(), 0);
}

TEST_F(GrpcPeerTransportTest, RecvChunksHandsOverEveryByteInOrder) {
  GrpcPeerTransport t0(worker_->network.get(),
                       JobOn("chunks", 0, Addresses(2)));
  GrpcPeerTransport t1(worker_->network.get(),
                       JobOn("chunks", 1, Addresses(2)));
  const std::vector<uint8_t> data = RandomBytes((5 << 19) + 3, 3);
  const PeerMessage message{0, 7, &kPrint};
  ASSERT_TRUE(t0.Send(1, message, data).ok());
  std::vector<uint8_t> got;
  int chunks = 0;
  ASSERT_TRUE(t1.RecvChunks(0, message, data.size(),
                            [&](absl::Span<const uint8_t> chunk) {
                              got.insert(got.end(), chunk.begin(), chunk.end());
                              ++chunks;
                            })
                  .ok());
  EXPECT_EQ(got, data);
  EXPECT_GE(chunks, 3);  // at least one per frame
  // The size is checked as Recv checks it, before anything is consumed.
  ASSERT_TRUE(t0.Send(1, PeerMessage{0, 8, &kPrint}, data).ok());
  EXPECT_TRUE(
      StatusIs(t1.RecvChunks(0, PeerMessage{0, 8, &kPrint}, 10,
                             [&](absl::Span<const uint8_t>) { ADD_FAILURE(); }),
               absl::StatusCode::kInvalidArgument, {"10 were expected"}));
}

TEST_F(GrpcPeerTransportTest, RingAllReduceMatchesAPlainSum) {
  for (const int n : {2, 3}) {
    const std::string job = absl::StrCat("ring-", n);
    // int64 sums are exact: every rank must hold exactly the plain sum.
    // 100003 elements over n segments in pieces of 7919 elements: ragged
    // segments, and frames whose slices split elements.
    const size_t count = 100003;
    std::vector<std::vector<int64_t>> inputs(n, std::vector<int64_t>(count));
    std::vector<int64_t> expected(count, 0);
    std::mt19937_64 rng(n);
    for (int r = 0; r < n; ++r) {
      for (size_t i = 0; i < count; ++i) {
        inputs[r][i] = static_cast<int64_t>(rng() >> 8);
        expected[i] += inputs[r][i];
      }
    }
    // The devices share the worker's inbox, which a transport's destructor
    // clears of the job: all live until every rank is done.
    std::vector<std::unique_ptr<GrpcPeerTransport>> transports;
    for (int r = 0; r < n; ++r) {
      transports.push_back(std::make_unique<GrpcPeerTransport>(
          worker_->network.get(), JobOn(job, r, Addresses(n))));
    }
    std::vector<absl::Status> status(n);
    std::vector<std::thread> ranks;
    for (int r = 0; r < n; ++r) {
      ranks.emplace_back([&, r] {
        GrpcPeerTransport& t = *transports[r];
        AllReduceOptions o;
        for (int d = 0; d < n; ++d) o.group.devices.push_back(d);
        o.group.rank = r;
        o.tag = CollectiveTag{0, kPrint};
        o.dtype = DType::kInt64;
        o.data = absl::MakeSpan(reinterpret_cast<uint8_t*>(inputs[r].data()),
                                count * sizeof(int64_t));
        o.algorithm = Algorithm::kRing;
        o.piece_bytes = 7919 * sizeof(int64_t);
        status[r] = AllReduce(o, t);
        if (t.lent() != 0) status[r] = absl::InternalError("still lent");
      });
    }
    for (std::thread& t : ranks) t.join();
    for (int r = 0; r < n; ++r) {
      ASSERT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r];
      EXPECT_EQ(inputs[r], expected) << "rank " << r << " of " << n;
    }
  }
}

TEST(GrpcPeerTransportLossTest, BuffersLentToALostPeerComeBack) {
  std::unique_ptr<Worker> a = StartWorker(1);
  std::unique_ptr<Worker> b = StartWorker(2);
  GrpcPeerTransport t0(a->network.get(),
                       JobOn("lost", 0, {a->address, b->address}));
  const PeerMessage first{0, 0, &kPrint};
  const PeerMessage second{0, 1, &kPrint};
  auto data = std::make_unique<std::vector<uint8_t>>(RandomBytes(4 << 20, 4));
  // Peer b goes away while (or before) the frames are under way.
  ASSERT_TRUE(t0.Lend(1, first, *data).ok());
  Stop(*b);
  // Either queued behind the broken stream or refused: both come back.
  t0.Lend(1, second, *data).IgnoreError();
  EXPECT_TRUE(t0.Settle(/*abandon=*/true).ok());
  EXPECT_EQ(t0.lent(), 0);
  data.reset();  // gRPC never reads it again
  Stop(*a);
}

// A peer that takes the stream and never reads from it, as a stopped
// process does (its kernel buffers and the HTTP/2 window fill up).
class DeafReactor final : public grpc::ServerGenericBidiReactor {
 public:
  void OnCancel() override { Finish(grpc::Status::CANCELLED); }
  void OnDone() override { delete this; }
};
class DeafPeer final : public grpc::CallbackGenericService {
 public:
  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext*) override {
    return new DeafReactor;
  }
};

TEST(GrpcPeerTransportLossTest, AnAbandonDoesNotWaitOnAPeerThatDoesNotRead) {
  std::unique_ptr<Worker> a = StartWorker(1);
  DeafPeer deaf;
  grpc::ServerBuilder b;
  int port = 0;
  b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  ConfigureServerBuilder(b);  // a worker's window: BDP probing off
  b.RegisterCallbackGenericService(&deaf);
  std::unique_ptr<grpc::Server> server = b.BuildAndStart();
  ASSERT_NE(port, 0);
  // A collective may wait an hour for a peer; a link that carries nothing
  // (4 MiB: all of it fits the link's queue, none the peer's window)
  // must not hold the abandoning job (and the worker's next ones) that long.
  GrpcPeerTransport::Options o =
      JobOn("deaf", 0, {a->address, absl::StrCat("127.0.0.1:", port)});
  o.collective_timeout = absl::Hours(1);
  o.deadline = absl::Now() + absl::Hours(2);
  GrpcPeerTransport t0(a->network.get(), o);
  auto data = std::make_unique<std::vector<uint8_t>>(RandomBytes(4 << 20, 5));
  ASSERT_TRUE(t0.Lend(1, PeerMessage{0, 0, &kPrint}, *data).ok());
  ASSERT_GT(t0.lent(), 0);  // the peer's window cannot take 4 MiB
  EXPECT_TRUE(t0.Settle(/*abandon=*/true).ok());
  EXPECT_EQ(t0.lent(), 0);
  data.reset();  // gRPC never reads it again
  server->Shutdown(std::chrono::system_clock::now());
  server->Wait();
  Stop(*a);
}

}  // namespace
}  // namespace shardmap
