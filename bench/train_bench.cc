// train_bench: the README's training loop end to end, beside its floor.
//
//   train_step  impl=shardmap: `linear_sgd_step(x, y; state params; lr)`
//               through the C++ client on a local cluster of --workers
//               processes (mesh data=N), x [--rows, --cols] and y [--rows]
//               float64 resident and sharded P('data'), params [cols + 1]
//               resident and replicated (a state updated in place): what a
//               user's training step costs, ms per step, p50 / p99.
//               impl=in_process: the same step on the whole batch, called
//               as a single worker calls it (ShardExecutor::Run on a mesh
//               data=1, the psum a no-op): the floor, no network.
//
// Both runs start from zero parameters on the same data; after the last
// step their losses and parameters must agree to 1e-9 (relative) or the
// benchmark fails: the figure is of a step that computes the right thing.
// Prints one RESULT line per figure.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/bench_util.h"
#include "client/local_cluster.h"
#include "client/shard_client.h"
#include "core/mesh.h"
#include "core/partition_spec.h"
#include "core/status_util.h"
#include "core/tensor.h"
#include "ops/process_tuning.h"
#include "worker/collectives/communicator.h"
#include "worker/functions/function_registry.h"
#include "worker/shard_executor.h"
#include "worker/transport/peer_transport.h"

namespace shardmap {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kKwargs[] = R"({"lr": 0.1, "axes": "data"})";

struct Timing {
  std::vector<double> us;  // sorted once filled
  double at(double q) const {
    return us[std::min(us.size() - 1, static_cast<size_t>(q * us.size()))];
  }
};

struct Trained {
  Timing timing;
  double last_loss = 0;
  std::vector<double> params;
};

Tensor Normal(Shape shape, unsigned seed) {
  Tensor t(DType::kFloat64, std::move(shape));
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> n;
  for (int64_t i = 0; i < t.num_elements(); ++i)
    t.data_as<double>()[i] = n(rng);
  return t;
}

// y = x @ w + 0.5 for a random w, as the README's example.
Tensor Targets(const Tensor& x) {
  const int64_t rows = x.shape()[0], cols = x.shape()[1];
  const Tensor w = Normal({cols}, 7);
  Tensor y(DType::kFloat64, {rows});
  for (int64_t i = 0; i < rows; ++i) {
    double s = 0.5;
    for (int64_t j = 0; j < cols; ++j) {
      s += x.data_as<double>()[i * cols + j] * w.data_as<double>()[j];
    }
    y.data_as<double>()[i] = s;
  }
  return y;
}

std::vector<double> Values(const Tensor& t) {
  return std::vector<double>(t.data_as<double>(),
                             t.data_as<double>() + t.num_elements());
}

absl::StatusOr<Trained> ThroughCluster(const Tensor& x, const Tensor& y,
                                       int workers, int warmup, int steps) {
  LocalCluster::Options options;
  options.num_workers = workers;
  options.start_timeout = absl::Seconds(60);
  SHARD_ASSIGN_OR_RETURN(std::unique_ptr<LocalCluster> cluster,
                         LocalCluster::Start(options));
  ShardClient::Options client_options;
  client_options.address = cluster->address();
  client_options.security = cluster->client_security();
  SHARD_ASSIGN_OR_RETURN(std::unique_ptr<ShardClient> client,
                         ShardClient::Create(client_options));
  SHARD_ASSIGN_OR_RETURN(Mesh mesh,
                         Mesh::Parse("data=" + std::to_string(workers)));
  SHARD_ASSIGN_OR_RETURN(PartitionSpec rows, PartitionSpec::Parse("P('data')"));
  const Tensor zeros(DType::kFloat64, {x.shape()[1] + 1});
  SHARD_RETURN_IF_ERROR(client->Put("x", x, mesh, rows).status());
  SHARD_RETURN_IF_ERROR(client->Put("y", y, mesh, rows).status());
  SHARD_RETURN_IF_ERROR(
      client->Put("params", zeros, mesh, PartitionSpec()).status());

  JobRequest step;
  step.function = "linear_sgd_step";
  step.mesh = mesh;
  step.args = {nullptr, nullptr};
  step.resident_args = {"x", "y"};
  step.in_specs = {rows};
  step.out_specs = {PartitionSpec()};
  step.states = {{"params", "params", PartitionSpec(), std::nullopt}};
  step.kwargs_json = kKwargs;
  step.timeout = absl::Seconds(60);

  Trained out;
  for (int i = 0; i < warmup + steps; ++i) {
    const auto t0 = Clock::now();
    SHARD_ASSIGN_OR_RETURN(JobResult r, client->Run(step));
    const auto t1 = Clock::now();
    if (r.outputs.size() != 1) {
      return absl::InternalError("linear_sgd_step returned no loss");
    }
    out.last_loss = r.outputs[0].data_as<double>()[0];
    if (i >= warmup) {
      out.timing.us.push_back(
          std::chrono::duration<double, std::micro>(t1 - t0).count());
    }
  }
  SHARD_ASSIGN_OR_RETURN(Tensor params, client->Get("params"));
  out.params = Values(params);
  return out;
}

// The transport of a mesh of one device: its collectives never send.
class SoloTransport : public PeerTransport {
 public:
  int64_t device() const override { return 0; }
  int64_t num_devices() const override { return 1; }
  absl::Status Send(int64_t, const PeerMessage&,
                    absl::Span<const uint8_t>) override {
    return absl::InternalError("a one-device mesh sent a message");
  }
  absl::Status Recv(int64_t, const PeerMessage&, absl::Span<uint8_t>) override {
    return absl::InternalError("a one-device mesh waited for a message");
  }
};

absl::StatusOr<Trained> InProcess(const Tensor& x, const Tensor& y, int warmup,
                                  int steps) {
  FunctionRegistry registry;
  RegisterStateBuiltins(registry);
  const ShardExecutor executor(&registry);
  SHARD_ASSIGN_OR_RETURN(Mesh mesh, Mesh::Parse("data=1"));
  // A group of one device: psum returns its input and sends nothing.
  SoloTransport solo;
  Communicator comm(&mesh, 0, &solo, {});
  std::map<std::string, Tensor> states;
  states["params"] = Tensor(DType::kFloat64, {x.shape()[1] + 1});

  Trained out;
  for (int i = 0; i < warmup + steps; ++i) {
    ShardCall call;  // the arguments are copied in outside the timing
    call.function = "linear_sgd_step";
    call.mesh = mesh;
    call.kwargs_json = kKwargs;
    call.args.push_back(x.Clone());
    call.args.push_back(y.Clone());
    const auto t0 = Clock::now();
    SHARD_ASSIGN_OR_RETURN(std::vector<Tensor> r,
                           executor.Run(std::move(call), &comm, &states));
    const auto t1 = Clock::now();
    out.last_loss = r.at(0).data_as<double>()[0];
    if (i >= warmup) {
      out.timing.us.push_back(
          std::chrono::duration<double, std::micro>(t1 - t0).count());
    }
  }
  out.params = Values(states["params"]);
  return out;
}

bool Close(double a, double b) {
  return std::fabs(a - b) <= 1e-9 * std::max(1.0, std::fabs(b));
}

void Print(const char* impl, int n, int64_t bytes, Trained& t) {
  std::sort(t.timing.us.begin(), t.timing.us.end());
  std::printf(
      "RESULT impl=%s op=train_step n=%d bytes=%lld iters=%zu median_us=%.2f "
      "min_us=%.2f max_us=%.2f p99_us=%.2f loss=%.6g\n",
      impl, n, static_cast<long long>(bytes), t.timing.us.size(),
      t.timing.at(0.5), t.timing.us.front(), t.timing.us.back(),
      t.timing.at(0.99), t.last_loss);
  std::fflush(stdout);
}

int Run(int workers, int64_t rows, int64_t cols, int steps) {
  const Tensor x = Normal({rows, cols}, 1);
  const Tensor y = Targets(x);
  const int warmup = std::max(2, steps / 10);
  auto local = InProcess(x, y, warmup, steps);
  auto remote = ThroughCluster(x, y, workers, warmup, steps);
  for (const auto* r : {&local, &remote}) {
    if (!r->ok()) {
      std::fprintf(stderr, "train_bench: %s\n", r->status().ToString().c_str());
      return 1;
    }
  }
  bool same = Close(remote->last_loss, local->last_loss);
  for (size_t j = 0; j < local->params.size(); ++j) {
    same = same && Close(remote->params.at(j), local->params[j]);
  }
  if (!same || remote->params.size() != local->params.size()) {
    std::fprintf(stderr,
                 "train_bench: the cluster's training differs from the "
                 "in-process one (loss %.17g vs %.17g)\n",
                 remote->last_loss, local->last_loss);
    return 1;
  }
  const int64_t bytes = x.num_bytes() + y.num_bytes();
  Print("in_process", 1, bytes, *local);
  Print("shardmap", workers, bytes, *remote);
  return 0;
}

}  // namespace
}  // namespace shardmap

int main(int argc, char** argv) {
  shardmap::TuneProcess();
  CLI::App app{"train_bench: the README's training step, cluster vs floor"};
  int workers = 4, steps = 100, timeout = 600;
  int64_t rows = 4096, cols = 16;
  app.add_option("--workers", workers)->capture_default_str();
  app.add_option("--rows", rows, "rows of x (the global batch)")
      ->capture_default_str();
  app.add_option("--cols", cols, "columns of x (features)")
      ->capture_default_str();
  app.add_option("--steps", steps, "measured steps of each run")
      ->capture_default_str();
  app.add_option("--timeout", timeout, "seconds before giving up")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (workers < 1 || rows % workers != 0 || cols < 1 || steps < 1) {
    std::fprintf(stderr, "train_bench: --rows must split over --workers\n");
    return 64;
  }
  // The cluster's processes die with us (PDEATHSIG).
  shardmap_bench::StartWatchdog("train_bench", timeout);
  return shardmap::Run(workers, rows, cols, steps);
}
