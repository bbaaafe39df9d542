// many_clients_test: --clients concurrent clients (256; each its own
// ShardClient, channel and thread) each run --jobs-per-client tiny jobs, one
// after another, all clients at once, against a local cluster of --workers
// processes whose coordinator runs at most --max-concurrent-jobs (16) jobs at a
// time. Every job must succeed (none refused: the others wait for their turn)
// with the values a plain loop computes (`scale` of each client's own array),
// and the coordinator's thread count, polled from /proc while the jobs run,
// must stay within its idle count plus 2 x (1 + workers) per job it may run (a
// job's thread, and one per device call: twice that for threads still
// idling out of the pools), and below the number of clients: a waiting
// RunJob call holds no thread (server/run_job_call.h), so the coordinator's
// threads are bounded by the jobs it runs, not by the clients that wait. A
// thread per call would need at least one per client.
//
// Prints the idle and peak thread counts, jobs/s and the latency p50/p99.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/bench_util.h"
#include "client/local_cluster.h"
#include "client/shard_client.h"

namespace shardmap {
namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  int workers = 4;
  int clients = 256;
  int jobs_per_client = 4;
  int max_concurrent_jobs = 16;
};

// Client `c`'s job `j`: 16 float32 over the mesh's x axis, scaled by alpha.
struct Job {
  JobRequest request;
  Tensor arg;
  std::vector<float> expected;
};

Job MakeJob(const Options& o, int c, int j) {
  Job job;
  job.arg = Tensor(DType::kFloat32, {16});
  float* x = job.arg.data_as<float>();
  const float alpha = static_cast<float>(1 + j);
  for (int i = 0; i < 16; ++i) {
    x[i] = static_cast<float>(c * 16 + i);
    job.expected.push_back(alpha * x[i]);  // exact: small integers
  }
  JobRequest& r = job.request;
  r.function = "scale";
  r.mesh = *Mesh::Create({{"x", o.workers}});
  r.args = {&job.arg};
  r.in_specs = r.out_specs = {*PartitionSpec::Parse("P('x')")};
  r.kwargs_json = absl::StrCat(R"({"alpha": )", alpha, "}");
  r.timeout = absl::Seconds(120);
  return job;
}

int Run(const Options& o) {
  LocalCluster::Options co;
  co.num_workers = o.workers;
  co.start_timeout = absl::Seconds(60);
  co.coordinator_args = {
      absl::StrCat("--max-concurrent-jobs=", o.max_concurrent_jobs)};
  auto cluster = LocalCluster::Start(co);
  if (!cluster.ok()) {
    std::fprintf(stderr, "many_clients_test: %s\n",
                 cluster.status().ToString().c_str());
    return 1;
  }
  const pid_t coordinator = (*cluster)->coordinator_pid();
  const long idle_threads =
      shardmap_bench::ReadStatusKb(coordinator, "Threads:");
  const long bound =
      std::min<long>(o.clients - 1, idle_threads + 2L * (1 + o.workers) *
                                                       o.max_concurrent_jobs);

  std::atomic<bool> stop_polling{false};
  std::atomic<long> peak_threads{0};
  std::thread poller([&] {
    while (!stop_polling) {
      const long n = shardmap_bench::ReadStatusKb(coordinator, "Threads:");
      peak_threads = std::max(peak_threads.load(), n);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });

  std::mutex mu;
  std::vector<std::string> errors;
  std::vector<double> latency_ms;
  std::atomic<int> ready{0};
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < o.clients; ++c) {
    threads.emplace_back([&, c] {
      auto client =
          ShardClient::Create({(*cluster)->address(), absl::Seconds(30),
                               (*cluster)->client_security()});
      std::vector<double> mine;
      std::string error;
      for (int j = 0; client.ok() && j < o.jobs_per_client && error.empty();
           ++j) {
        Job job = MakeJob(o, c, j);
        const auto t0 = Clock::now();
        auto r = (*client)->Run(job.request);
        mine.push_back(
            std::chrono::duration<double, std::milli>(Clock::now() - t0)
                .count());
        if (!r.ok()) {
          error = absl::StrCat("client ", c, " job ", j, ": ",
                               r.status().ToString());
        } else if (r->outputs.size() != 1 ||
                   r->outputs[0].num_elements() != 16 ||
                   !std::equal(job.expected.begin(), job.expected.end(),
                               r->outputs[0].data_as<float>())) {
          error = absl::StrCat("client ", c, " job ", j, ": wrong values");
        }
      }
      if (!client.ok()) error = client.status().ToString();
      std::lock_guard<std::mutex> lock(mu);
      if (!error.empty()) errors.push_back(error);
      latency_ms.insert(latency_ms.end(), mine.begin(), mine.end());
    });
  }
  for (auto& t : threads) t.join();
  const double seconds =
      std::chrono::duration<double>(Clock::now() - start).count();
  stop_polling = true;
  poller.join();

  std::sort(latency_ms.begin(), latency_ms.end());
  auto at = [&](double q) {
    return latency_ms.empty()
               ? 0.0
               : latency_ms[static_cast<size_t>(q * (latency_ms.size() - 1))];
  };
  std::printf(
      "many_clients_test: %d clients x %d jobs in %.2f s (%.0f jobs/s), "
      "latency p50 %.2f ms p99 %.2f ms; coordinator threads idle %ld, peak "
      "%ld, bound %ld (--max-concurrent-jobs %d)\n",
      o.clients, o.jobs_per_client, seconds,
      latency_ms.size() / std::max(seconds, 1e-9), at(0.5), at(0.99),
      idle_threads, peak_threads.load(), bound, o.max_concurrent_jobs);
  for (size_t i = 0; i < std::min<size_t>(errors.size(), 10); ++i) {
    std::fprintf(stderr, "many_clients_test: %s\n", errors[i].c_str());
  }
  if (!errors.empty()) {
    std::fprintf(stderr, "many_clients_test: FAIL: %zu clients had errors\n",
                 errors.size());
    return 1;
  }
  if (idle_threads <= 0 || peak_threads.load() > bound) {
    std::fprintf(stderr,
                 "many_clients_test: FAIL: the coordinator's threads peaked "
                 "at %ld (idle %ld), over the bound %ld\n",
                 peak_threads.load(), idle_threads, bound);
    return 1;
  }
  std::printf("many_clients_test: PASS\n");
  return 0;
}

}  // namespace
}  // namespace shardmap

int main(int argc, char** argv) {
  shardmap::Options o;
  CLI::App app{
      "many_clients_test: many concurrent clients, every job served, the "
      "coordinator's threads bounded by the jobs it runs"};
  app.add_option("--workers", o.workers)
      ->capture_default_str()
      ->check(CLI::Range(1, 16));
  app.add_option("--clients", o.clients)
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  app.add_option("--jobs-per-client", o.jobs_per_client)
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  app.add_option("--max-concurrent-jobs", o.max_concurrent_jobs)
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  CLI11_PARSE(app, argc, argv);
  return shardmap::Run(o);
}
