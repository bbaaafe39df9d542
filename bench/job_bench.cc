// job_bench: shardmap end to end through the C++ client (client ->
// coordinator -> workers -> back), against a local cluster of real
// processes on 127.0.0.1 (client/local_cluster.h: one shardmap-coordinator
// and --workers shardmap-worker processes from this binary's directory).
//
//   job_tiny     `identity` on 16 float32 sharded P('x') over a mesh x=N:
//                per-job latency, p50 / p99 over --tiny-iters jobs
//   job_rate     jobs/s of the same job from --clients concurrent threads,
//                each with its own ShardClient, for --seconds; and what
//                each job cost the coordinator and the workers together
//                meanwhile: CPU time and context switches (from /proc)
//   job_big      `identity` on --big-bytes of float32 sharded P('x') over
//                x=N, output P('x'): the bytes go client -> coordinator ->
//                workers -> coordinator -> client. Outputs are checked.
//                One untimed job first (its time is first_us: the first
//                big job also faults every array's pages in), then
//                --big-iters timed ones. The coordinator's and every worker's
//                peak RSS (VmHWM, reset through /proc/PID/clear_refs just
//                before) covers exactly these jobs.
//   program_tiny `lambda x: x` as an expression program beside the native
//                `identity` on the same 16 float32, interleaved job by job
//   program_mlp  the tensor-parallel MLP psum(relu(x @ w1) @ w2, 'x') as
//                the native `mlp_tp` and as a program, interleaved, with
//                the weights resident, at --mlp-rows x --mlp-width: compute
//                dominates. Outputs of the two are compared.
//
// Prints one RESULT line per figure.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "bench/bench_util.h"
#include "client/local_cluster.h"
#include "client/shard_client.h"
#include "ops/process_tuning.h"

namespace shardmap {
namespace {

using shardmap_bench::ProcessCost;
using shardmap_bench::ReadHwmKb;
using shardmap_bench::ReadProcessCost;
using shardmap_bench::ResetHwm;
using shardmap_bench::SwitchesBetween;

using Clock = std::chrono::steady_clock;

JobRequest IdentityJob(const Tensor* x, int workers) {
  JobRequest job;
  job.function = "identity";
  job.mesh = *Mesh::Create({{"x", workers}});
  job.args = {x};
  job.in_specs = {*PartitionSpec::Parse("P('x')")};
  job.out_specs = {*PartitionSpec::Parse("P('x')")};
  job.timeout = absl::Seconds(120);
  return job;
}

bool SameBytes(const Tensor& a, const Tensor& b) {
  return a.num_bytes() == b.num_bytes() &&
         std::memcmp(a.data(), b.data(), a.num_bytes()) == 0;
}

struct Sorted {
  std::vector<double> us;
  double at(double p) {
    std::sort(us.begin(), us.end());
    return us[std::min(us.size() - 1, static_cast<size_t>(p * us.size()))];
  }
};

// Runs `a` and `b` alternately `iters` times after a warm-up; their
// latencies in microseconds. Each output is checked by `check`.
bool Interleaved(const ShardClient& client, const JobRequest& a,
                 const JobRequest& b, int iters,
                 const std::function<bool(const JobResult&)>& check,
                 Sorted* a_us, Sorted* b_us) {
  const int warmup = std::max(2, iters / 10);
  for (int it = 0; it < warmup + iters; ++it) {
    for (int which = 0; which < 2; ++which) {
      const auto t0 = Clock::now();
      auto r = client.Run(which == 0 ? a : b);
      const auto t1 = Clock::now();
      if (!r.ok() || !check(*r)) {
        std::fprintf(stderr, "job_bench: %s job failed: %s\n",
                     which == 0 ? "native" : "program",
                     r.ok() ? "wrong output" : r.status().ToString().c_str());
        return false;
      }
      if (it >= warmup) {
        (which == 0 ? a_us : b_us)
            ->us.push_back(
                std::chrono::duration<double, std::micro>(t1 - t0).count());
      }
    }
  }
  return true;
}

void PrintPair(const char* op, int workers, int64_t bytes, Sorted& native,
               Sorted& program) {
  for (int which = 0; which < 2; ++which) {
    Sorted& s = which == 0 ? native : program;
    const double median = s.at(0.5);
    std::printf(
        "RESULT impl=%s op=%s n=%d bytes=%lld iters=%zu median_us=%.2f "
        "min_us=%.2f max_us=%.2f p99_us=%.2f algo=client_coordinator_"
        "workers\n",
        which == 0 ? "shardmap_native" : "shardmap_program", op, workers,
        static_cast<long long>(bytes), s.us.size(), median, s.us.front(),
        s.us.back(), s.at(0.99));
  }
  std::fflush(stdout);
}

// Native functions beside the same functions as expression programs.
int RunPrograms(const ShardClient& client, int workers, int tiny_iters,
                int mlp_rows, int mlp_width, int mlp_iters) {
  Tensor tiny(DType::kFloat32, {16});
  for (int i = 0; i < 16; ++i) tiny.data_as<float>()[i] = i;
  JobRequest native = IdentityJob(&tiny, workers);
  JobRequest program = native;
  program.function.clear();
  program.program = "lambda x: x";
  Sorted n_us, p_us;
  if (!Interleaved(
          client, native, program, tiny_iters,
          [&](const JobResult& r) {
            return r.outputs.size() == 1 && SameBytes(r.outputs[0], tiny);
          },
          &n_us, &p_us)) {
    return 1;
  }
  PrintPair("program_tiny", workers, 64, n_us, p_us);
  if (mlp_iters <= 0) return 0;
  // x replicated, w1 split by columns, w2 by rows over x=workers.
  const int64_t hidden = int64_t{mlp_width} * 2;
  Tensor x(DType::kFloat32, {mlp_rows, mlp_width});
  Tensor w1(DType::kFloat32, {mlp_width, hidden});
  Tensor w2(DType::kFloat32, {hidden, mlp_width});
  uint32_t seed = 7;
  for (Tensor* t : {&x, &w1, &w2}) {
    float* p = t->data_as<float>();
    for (int64_t i = 0; i < t->num_elements(); ++i) {
      seed = seed * 1664525u + 1013904223u;
      p[i] = static_cast<float>(seed >> 8) / 16777216.0f - 0.5f;
    }
  }
  const Mesh mesh = *Mesh::Create({{"x", workers}});
  for (auto [name, t, spec] : {std::tuple{"bench/w1", &w1, "P(None, 'x')"},
                               std::tuple{"bench/w2", &w2, "P('x', None)"}}) {
    auto put = client.Put(name, *t, mesh, *PartitionSpec::Parse(spec),
                          /*overwrite=*/true);
    if (!put.ok()) {
      std::fprintf(stderr, "job_bench: put %s: %s\n", name,
                   put.status().ToString().c_str());
      return 1;
    }
  }
  JobRequest mlp;
  mlp.function = "mlp_tp";
  mlp.kwargs_json = R"({"axes": "x"})";
  mlp.mesh = mesh;
  mlp.args = {&x, nullptr, nullptr};
  mlp.resident_args = {"", "bench/w1", "bench/w2"};
  mlp.in_specs = {*PartitionSpec::Parse("P()"),
                  *PartitionSpec::Parse("P(None, 'x')"),
                  *PartitionSpec::Parse("P('x', None)")};
  mlp.out_specs = {*PartitionSpec::Parse("P()")};
  mlp.timeout = absl::Seconds(300);
  JobRequest mlp_program = mlp;
  mlp_program.function.clear();
  mlp_program.kwargs_json.clear();
  mlp_program.program = "lambda x, w1, w2: psum(relu(x @ w1) @ w2, 'x')";
  std::optional<Tensor> first;
  Sorted mn, mp;
  if (!Interleaved(
          client, mlp, mlp_program, mlp_iters,
          [&](const JobResult& r) {
            if (r.outputs.size() != 1) return false;
            if (!first.has_value()) first = r.outputs[0].Clone();
            // Both sum the same blocks in the same order: within float
            // rounding of each other.
            const float* a = first->data_as<float>();
            const float* b = r.outputs[0].data_as<float>();
            for (int64_t i = 0; i < first->num_elements(); ++i) {
              if (std::abs(a[i] - b[i]) > 1e-3f * (1 + std::abs(a[i]))) {
                return false;
              }
            }
            return true;
          },
          &mn, &mp)) {
    return 1;
  }
  PrintPair("program_mlp", workers, x.num_bytes(), mn, mp);
  return 0;
}

int Run(int workers, int tiny_iters, int clients, double seconds,
        int64_t big_bytes, int big_iters, int mlp_rows, int mlp_width,
        int mlp_iters, const std::vector<std::string>& coordinator_flags) {
  LocalCluster::Options options;
  options.num_workers = workers;
  options.coordinator_args = coordinator_flags;
  options.start_timeout = absl::Seconds(60);
  auto cluster = LocalCluster::Start(options);
  if (!cluster.ok()) {
    std::fprintf(stderr, "job_bench: %s\n",
                 cluster.status().ToString().c_str());
    return 1;
  }
  const std::string address = (*cluster)->address();
  // The local cluster's token (and TLS settings, if any).
  const ShardClient::Options client_options{address, absl::Seconds(10),
                                            (*cluster)->client_security()};
  auto client = ShardClient::Create(client_options);
  if (!client.ok()) {
    std::fprintf(stderr, "job_bench: %s\n", client.status().ToString().c_str());
    return 1;
  }

  // Tiny jobs, one at a time.
  Tensor tiny(DType::kFloat32, {16});
  for (int i = 0; i < 16; ++i) tiny.data_as<float>()[i] = i;
  const JobRequest tiny_job = IdentityJob(&tiny, workers);
  Sorted lat;
  const int warmup = std::max(5, tiny_iters / 10);
  for (int it = 0; it < warmup + tiny_iters; ++it) {
    const auto t0 = Clock::now();
    auto r = (*client)->Run(tiny_job);
    const auto t1 = Clock::now();
    if (!r.ok() || r->outputs.size() != 1 || !SameBytes(r->outputs[0], tiny)) {
      std::fprintf(stderr, "job_bench: tiny job failed: %s\n",
                   r.ok() ? "wrong output" : r.status().ToString().c_str());
      return 1;
    }
    if (it >= warmup) {
      lat.us.push_back(
          std::chrono::duration<double, std::micro>(t1 - t0).count());
    }
  }
  const double p50 = lat.at(0.5), p99 = lat.at(0.99);
  std::printf(
      "RESULT impl=shardmap op=job_tiny n=%d bytes=64 iters=%zu median_us=%.2f "
      "min_us=%.2f max_us=%.2f p90_us=%.2f p99_us=%.2f algo=client_coordinator_"
      "workers\n",
      workers, lat.us.size(), p50, lat.us.front(), lat.us.back(), lat.at(0.9),
      p99);
  std::fflush(stdout);

  // The same job from `clients` threads at once.
  {
    std::atomic<bool> stop{false}, failed{false};
    std::atomic<long> jobs{0};
    const auto start = Clock::now() + std::chrono::milliseconds(500);
    std::vector<std::thread> threads;
    for (int i = 0; i < clients; ++i) {
      threads.emplace_back([&] {
        auto c = ShardClient::Create(client_options);
        if (!c.ok()) {
          failed = true;
          return;
        }
        while (!stop) {
          const bool counted = Clock::now() >= start;
          auto r = (*c)->Run(tiny_job);
          if (!r.ok() || r->outputs.size() != 1 ||
              !SameBytes(r->outputs[0], tiny)) {
            std::fprintf(
                stderr, "job_bench: concurrent job failed: %s\n",
                r.ok() ? "wrong output" : r.status().ToString().c_str());
            failed = true;
            return;
          }
          if (counted && !stop) ++jobs;
        }
      });
    }
    // What the cluster spends on the jobs counted: the coordinator's and
    // the workers' CPU time and context switches over the same window.
    auto cluster_cost = [&] {
      std::vector<ProcessCost> cost{
          ReadProcessCost((*cluster)->coordinator_pid())};
      for (pid_t w : (*cluster)->worker_pids())
        cost.push_back(ReadProcessCost(w));
      return cost;
    };
    std::this_thread::sleep_until(start);
    const std::vector<ProcessCost> cost0 = cluster_cost();
    const auto t0 = Clock::now();
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    stop = true;
    const double elapsed =
        std::chrono::duration<double>(Clock::now() - t0).count();
    const std::vector<ProcessCost> cost1 = cluster_cost();
    for (auto& t : threads) t.join();
    if (failed) return 1;
    // Per job: [0] the coordinator, [1] the workers together.
    double cpu_us[2] = {0, 0}, switches[2] = {0, 0};
    for (size_t i = 0; i < cost0.size(); ++i) {
      if (cost0[i].cpu_us < 0 || cost1[i].cpu_us < 0 || jobs == 0) {
        std::fprintf(stderr,
                     "job_bench: no job, or a cluster process is gone\n");
        return 1;
      }
      cpu_us[i > 0] += (cost1[i].cpu_us - cost0[i].cpu_us) / jobs;
      switches[i > 0] +=
          static_cast<double>(SwitchesBetween(cost0[i], cost1[i])) / jobs;
    }
    std::printf(
        "RESULT impl=shardmap op=job_rate n=%d bytes=64 clients=%d jobs=%ld "
        "seconds=%.2f rate_per_s=%.1f coordinator_cpu_us_per_job=%.1f "
        "coordinator_switches_per_job=%.2f workers_cpu_us_per_job=%.1f "
        "workers_switches_per_job=%.2f algo=client_coordinator_workers\n",
        workers, clients, jobs.load(), elapsed, jobs / elapsed, cpu_us[0],
        switches[0], cpu_us[1], switches[1]);
    std::fflush(stdout);
  }

  // The big job.
  if (big_iters > 0) {
    Tensor big(DType::kFloat32, {big_bytes / 4});
    float* p = big.data_as<float>();
    for (int64_t i = 0; i < big.num_elements(); ++i) p[i] = i % 1000003;
    const JobRequest big_job = IdentityJob(&big, workers);
    ResetHwm((*cluster)->coordinator_pid());
    for (pid_t w : (*cluster)->worker_pids()) ResetHwm(w);
    // The first job of a fresh cluster also faults every array's pages in,
    // in every process; it is reported apart (first_us), and the timed
    // jobs that follow are the steady state repeated jobs run at.
    Sorted t;
    double first_us = 0;
    for (int it = -1; it < big_iters; ++it) {
      const auto t0 = Clock::now();
      auto r = (*client)->Run(big_job);
      const auto t1 = Clock::now();
      if (!r.ok() || r->outputs.size() != 1 || !SameBytes(r->outputs[0], big)) {
        std::fprintf(stderr, "job_bench: big job failed: %s\n",
                     r.ok() ? "wrong output" : r.status().ToString().c_str());
        return 1;
      }
      const double us =
          std::chrono::duration<double, std::micro>(t1 - t0).count();
      if (it < 0) {
        first_us = us;
      } else {
        t.us.push_back(us);
      }
    }
    std::vector<long> worker_kb;
    for (pid_t w : (*cluster)->worker_pids()) worker_kb.push_back(ReadHwmKb(w));
    const double median = t.at(0.5);
    std::printf(
        "RESULT impl=shardmap op=job_big n=%d bytes=%lld iters=%zu "
        "median_us=%.2f min_us=%.2f max_us=%.2f first_us=%.2f "
        "coordinator_rss_kb=%ld rss_kb=%s algo=client_coordinator_workers\n",
        workers, static_cast<long long>(big_bytes), t.us.size(), median,
        t.us.front(), t.us.back(), first_us,
        ReadHwmKb((*cluster)->coordinator_pid()),
        absl::StrJoin(worker_kb, ",").c_str());
    std::fflush(stdout);
  }
  return RunPrograms(**client, workers, tiny_iters, mlp_rows, mlp_width,
                     mlp_iters);
}

}  // namespace
}  // namespace shardmap

int main(int argc, char** argv) {
  shardmap::TuneProcess();
  CLI::App app{"job_bench: shardmap jobs end to end on a local cluster"};
  int workers = 4, tiny_iters = 500, clients = 8, big_iters = 2, timeout = 600;
  int mlp_rows = 256, mlp_width = 1024, mlp_iters = 5;
  double seconds = 3;
  int64_t big_bytes = 256 << 20;
  std::vector<std::string> coordinator_flags;
  app.add_option("--workers", workers)->capture_default_str();
  app.add_option("--tiny-iters", tiny_iters)->capture_default_str();
  app.add_option("--clients", clients)->capture_default_str();
  app.add_option("--seconds", seconds, "job_rate duration")
      ->capture_default_str();
  app.add_option("--big-bytes", big_bytes)->capture_default_str();
  app.add_option("--big-iters", big_iters)->capture_default_str();
  app.add_option("--mlp-rows", mlp_rows)->capture_default_str();
  app.add_option("--mlp-width", mlp_width,
                 "x is rows x width, w1 width x 2 "
                 "width, w2 2 width x width")
      ->capture_default_str();
  app.add_option("--mlp-iters", mlp_iters)->capture_default_str();
  app.add_option("--timeout", timeout, "seconds before giving up")
      ->capture_default_str();
  app.add_option("--coordinator-flag", coordinator_flags,
                 "a flag for the coordinator, e.g. --job-links=always "
                 "(repeatable)");
  CLI11_PARSE(app, argc, argv);
  if (big_bytes % (4 * workers) != 0) {
    std::fprintf(stderr, "--big-bytes must split into float32 per worker\n");
    return 64;
  }
  // The cluster's processes die with us (PDEATHSIG).
  shardmap_bench::StartWatchdog("job_bench", timeout);
  if ((2 * mlp_width) % workers != 0) {
    std::fprintf(stderr, "--mlp-width * 2 must split over the workers\n");
    return 64;
  }
  return shardmap::Run(workers, tiny_iters, clients, seconds, big_bytes,
                       big_iters, mlp_rows, mlp_width, mlp_iters,
                       coordinator_flags);
}
