// Integration tests through the C++ client library against an in-process
// cluster of real gRPC servers on 127.0.0.1: concurrency, deadlines, lost
// workers and protocol misuse. References are plain loops in this file.
#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "client/shard_client.h"
#include "rpc/channel.h"
#include "tests/integration/shared_cluster.h"
#include "tests/integration/test_cluster.h"
#include "tests/unit/wait_until.h"
#include "wire/proto_convert.h"

namespace shardmap {
namespace {

Tensor RandomMatrix(int64_t rows, int64_t cols, uint32_t seed) {
  Tensor t(DType::kFloat64, {rows, cols});
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(-1, 1);
  for (int64_t i = 0; i < rows * cols; ++i) t.data_as<double>()[i] = dist(rng);
  return t;
}

// a @ b by the textbook triple loop.
Tensor NaiveMatmul(const Tensor& a, const Tensor& b) {
  const int64_t m = a.shape()[0], k = a.shape()[1], n = b.shape()[1];
  Tensor c(DType::kFloat64, {m, n});
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p)
        s += a.data_as<double>()[i * k + p] * b.data_as<double>()[p * n + j];
      c.data_as<double>()[i * n + j] = s;
    }
  return c;
}

PartitionSpec Spec(const char* text) { return *PartitionSpec::Parse(text); }

class ClusterTest : public SharedClusterTest {};

TEST_F(ClusterTest, MatmulOfRowAndColumnBlocksMatchesNaiveProduct) {
  Tensor a = RandomMatrix(8, 5, 1), b = RandomMatrix(5, 6, 2);
  JobRequest job;
  job.function = "matmul";
  job.mesh = *Mesh::Parse("rows=2,cols=2");
  job.args = {&a, &b};
  job.in_specs = {Spec("P('rows', None)"), Spec("P(None, 'cols')")};
  job.out_specs = {Spec("P('rows', 'cols')")};
  auto result = Client()->Run(job);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->outputs.size(), 1u);
  EXPECT_EQ(result->num_devices, 4);
  Tensor want = NaiveMatmul(a, b);
  ASSERT_EQ(result->outputs[0].shape(), want.shape());
  for (int64_t i = 0; i < want.num_elements(); ++i) {
    EXPECT_NEAR(result->outputs[0].data_as<double>()[i],
                want.data_as<double>()[i], 1e-12);
  }
}

TEST_F(ClusterTest, ConcurrentClientsGetTheirOwnResults) {
  constexpr int kClients = 8;
  std::vector<absl::Status> statuses(kClients);
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      auto client = Client();
      for (int rep = 0; rep < 5; ++rep) {
        Tensor x(DType::kInt64, {16, 3});
        for (int64_t i = 0; i < 48; ++i)
          x.data_as<int64_t>()[i] = c * 1000 + rep * 100 + i;
        JobRequest job;
        job.function = "scale";
        job.mesh = *Mesh::Parse(c % 2 ? "x=4" : "x=2,y=2");
        job.args = {&x};
        job.in_specs = {Spec(c % 2 ? "P('x')" : "P(('y', 'x'))")};
        job.out_specs = job.in_specs;
        job.kwargs_json = "{\"alpha\": 3}";
        auto r = client->Run(job);
        if (!r.ok()) {
          statuses[c] = r.status();
          return;
        }
        for (int64_t i = 0; i < 48; ++i) {
          if (r->outputs[0].data_as<int64_t>()[i] !=
              3 * x.data_as<int64_t>()[i]) {
            statuses[c] = absl::InternalError("wrong value");
            return;
          }
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int c = 0; c < kClients; ++c)
    EXPECT_TRUE(statuses[c].ok()) << c << ": " << statuses[c];
}

TEST_F(ClusterTest, ShortClientDeadlineGivesDeadlineExceeded) {
  Tensor x(DType::kFloat32, {32 << 20});  // 128 MiB cannot move in 1 ms
  JobRequest job;
  job.function = "identity";
  job.mesh = *Mesh::Parse("x=4");
  job.args = {&x};
  job.in_specs = {Spec("P('x')")};
  job.out_specs = {Spec("P('x')")};
  job.timeout = absl::Milliseconds(1);
  auto r = Client()->Run(job);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded)
      << r.status();
  // The cluster still serves the next job.
  Tensor small(DType::kFloat32, {8});
  job.args = {&small};
  job.timeout = absl::Seconds(30);
  EXPECT_TRUE(Client()->Run(job).ok());
}

// A JobSpec for identity on float32[4] over x=2, as a raw stream message.
v1::RunJobRequest IdentitySpec() {
  v1::RunJobRequest req;
  v1::JobSpec* spec = req.mutable_spec();
  spec->set_function("identity");
  *spec->mutable_mesh() = MeshToProto(*Mesh::Parse("x=2"));
  *spec->add_args() = HeaderToProto(DType::kFloat32, {4});
  *spec->add_in_specs() = SpecToProto(Spec("P('x')"));
  *spec->add_out_specs() = SpecToProto(Spec("P('x')"));
  return req;
}

// Sends `messages` on a raw RunJob stream, bypassing the client library's
// checks, and returns the final status.
grpc::Status SendRaw(const std::string& address,
                     const std::vector<v1::RunJobRequest>& messages) {
  auto stub = v1::Coordinator::NewStub(MakeChannel(address));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  auto stream = stub->RunJob(&ctx);
  for (const auto& m : messages) {
    if (!stream->Write(m)) break;
  }
  stream->WritesDone();
  v1::RunJobResponse ignored;
  while (stream->Read(&ignored)) {
  }
  return stream->Finish();
}

TEST_F(ClusterTest, ChunksOutOfOrderAreRejected) {
  v1::RunJobRequest chunk;
  chunk.mutable_chunk()->set_index(0);
  chunk.mutable_chunk()->set_offset(8);  // should start at 0
  chunk.mutable_chunk()->set_data(std::string(8, '\0'));
  grpc::Status s = SendRaw(cluster_->address(), {IdentitySpec(), chunk});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("out of order"), std::string::npos)
      << s.error_message();
}

TEST_F(ClusterTest, StreamEndingEarlyIsRejected) {
  grpc::Status s = SendRaw(cluster_->address(), {IdentitySpec()});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("stream ended early"), std::string::npos);
}

TEST_F(ClusterTest, MissingDtypeIsRejected) {
  v1::RunJobRequest req = IdentitySpec();
  req.mutable_spec()->mutable_args(0)->clear_dtype();
  grpc::Status s = SendRaw(cluster_->address(), {req});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("args[0]"), std::string::npos)
      << s.error_message();
}

TEST_F(ClusterTest, StreamWithoutSpecIsRejected) {
  v1::RunJobRequest chunk;
  chunk.mutable_chunk()->set_data("abcd");
  grpc::Status s = SendRaw(cluster_->address(), {chunk});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("must start with a JobSpec"),
            std::string::npos);
}

// A worker that dies fails the jobs it is part of with UNAVAILABLE naming
// it; once it has left the pool, the mesh no longer fits.
// An array whose copies came to disagree (stored before copies were
// checked, or its blocks changed on disk): a get says so in its own words.
TEST_F(ClusterTest, GetOfAnArrayWhoseCopiesDifferSaysSo) {
  auto client = Client();
  Tensor a(DType::kInt32, {3});
  for (int i = 0; i < 3; ++i) a.data_as<int32_t>()[i] = i + 1;
  ASSERT_TRUE(client->Put("div/a", a, *Mesh::Parse("x=2"), Spec("P()")).ok());
  // Replace device 1's copy on the worker that holds it.
  bool changed = false;
  for (int w = 0; w < cluster_->num_workers() && !changed; ++w) {
    ResidentStore& store = cluster_->worker_store(w);
    for (auto& [name, block] : store.All()) {
      if (name != "div/a" || block.device != 1) continue;
      Tensor other(DType::kInt32, {3});
      for (int i = 0; i < 3; ++i) other.data_as<int32_t>()[i] = -7;
      ResidentStore::Block b = block;
      b.data = std::make_shared<const Tensor>(std::move(other));
      ASSERT_TRUE(store.Drop(name).ok());
      ASSERT_TRUE(store.Put(name, std::move(b)).ok());
      changed = true;
      break;
    }
  }
  ASSERT_TRUE(changed) << "no worker holds device 1 of div/a";
  absl::StatusOr<Tensor> got = client->Get("div/a");
  ASSERT_EQ(got.status().code(), absl::StatusCode::kDataLoss) << got.status();
  const std::string msg(got.status().message());
  for (const char* part :
       {"resident array 'div/a'", "holds copies that differ", "mesh axis 'x'",
        "device 0 (mesh coordinates (0,)", "device 1 (mesh coordinates (1,)"}) {
    EXPECT_NE(msg.find(part), std::string::npos) << part << ": " << msg;
  }
  for (const char* word : {"identity", "out_specs", "--no-check-rep"}) {
    EXPECT_EQ(msg.find(word), std::string::npos) << word << ": " << msg;
  }
  ASSERT_TRUE(client->Delete("div/a").ok());
}

TEST(LostWorkerTest, JobFailsNamingTheWorkerThenThePoolShrinks) {
  TestCluster cluster(
      {/*num_workers=*/2, /*heartbeat_timeout=*/absl::Milliseconds(500)});
  auto client = *ShardClient::Create({cluster.address()});
  const std::string lost = cluster.worker_address(1);
  cluster.KillWorker(1);
  Tensor x(DType::kFloat32, {4});
  JobRequest job;
  job.function = "identity";
  job.mesh = *Mesh::Parse("x=2");
  job.args = {&x};
  job.in_specs = {Spec("P('x')")};
  job.out_specs = {Spec("P('x')")};
  auto r = client->Run(job);
  // Before the pool notices, the job reaches the dead worker; after, it
  // cannot be placed. Both are errors users can act on.
  if (r.status().code() == absl::StatusCode::kUnavailable) {
    EXPECT_NE(r.status().message().find(lost), std::string::npos) << r.status();
  } else {
    EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition)
        << r.status();
  }
  // Once the pool has noticed the silent worker:
  WaitUntil([&client] {
    auto pool = client->Status();
    return pool.ok() && pool->workers_size() == 1;
  });
  r = client->Run(job);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("only 1 worker is alive"),
            std::string::npos)
      << r.status();
  auto status = client->Status();
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->workers_size(), 1);
  // A mesh that fits the survivors still runs.
  job.mesh = *Mesh::Parse("x=1");
  EXPECT_TRUE(client->Run(job).ok());
}

}  // namespace
}  // namespace shardmap
