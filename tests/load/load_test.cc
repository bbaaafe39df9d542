// load_test: --clients concurrent clients (each its own ShardClient) run
// --jobs mixed jobs against a local cluster of --workers real processes
// (client/local_cluster.h): identity, add, mul, scale, relu, matmul, sum,
// psum, all_gather and resident put/get/rm, on float32, float64, int32 and
// int64 arrays from a few bytes to a few MiB, plus one job of --big-bytes
// every --big-every jobs. Every result is compared bit for bit with a plain
// single-process computation (the inputs are small integers or quarters, so
// every sum and product is exact in every dtype and summation order).
//
// After --warmup jobs that are not measured, the jobs run in four
// quarters, each the same mix of kinds and sizes (with other values).
// After each, with the cluster idle, VmRSS of the coordinator and of every
// worker is polled from /proc/PID/status until it settles (tests/load/
// rss_poll.h). After the last quarter, the poll waits (60 s at most) until
// the cluster's total is within --max-rss-growth (10%) of its reading after
// the first, and so is each process, or within
// --rss-slack-mib (8 MiB) where that is more: an idle process holds 25-45
// MiB, and gRPC keeps each connection's read buffer at the size of its
// recent messages, which moves one process's reading by a few MiB from
// quarter to quarter. 8 MiB over 1,500 jobs still catches a leak of 6 KB
// per job. A sampler also records RSS while jobs run (mean and max of the
// first and last quarter, for the report).
// Fails (exit 1) on any job error, any wrong result, or RSS growth (unless
// --no-rss-check); prints jobs/s, latency p50/p99 and the RSS figures.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/bench_util.h"
#include "client/local_cluster.h"
#include "client/shard_client.h"
#include "core/dtype_dispatch.h"
#include "tests/load/load_flags.h"
#include "tests/load/rss_poll.h"
#include "tests/unit/test_arrays.h"

namespace shardmap {
namespace {

using Clock = std::chrono::steady_clock;

// Idle RSS after a quarter: settled once no process reached a new low for
// kSettle (core/idle_release.h releases after 1 s of quiet, checked every
// 250 ms); the last quarter's reading waits up to kIdleLimit for every process
// to come back within bounds, however busy the machine is.
constexpr auto kSettle = std::chrono::milliseconds(2000);
constexpr auto kIdleLimit = std::chrono::milliseconds(60000);

struct Options {
  int clients = 16;
  int jobs = 2000;
  int warmup = 200;
  int workers = 4;
  int big_every = 80;
  int64_t big_bytes = int64_t{64} << 20;
  double max_rss_growth = 0.10;
  double rss_slack_mib = 8;
  bool check_rss = true;
  uint64_t seed = 1;
};

// A stream of pseudo-random numbers from (seed, job).
class Rng {
 public:
  Rng(uint64_t seed, uint64_t job)
      : state_(Mix(seed * 0x100000001b3ULL + job)) {}
  uint64_t Next() { return state_ = Mix(state_); }
  int64_t Uniform(int64_t lo, int64_t hi) {  // [lo, hi]
    return lo +
           static_cast<int64_t>(Next() % static_cast<uint64_t>(hi - lo + 1));
  }
  template <typename T>
  T Pick(std::initializer_list<T> xs) {
    return xs.begin()[Next() % xs.size()];
  }

 private:
  uint64_t state_;
};

// Integers in [-8, 8]; floats are quarters in [-4, 4]. Sums of a few
// thousand products of such values are exact in every dtype, so any order
// of summation gives the same bits.
Tensor SmallValues(DType dtype, const Shape& shape, uint64_t seed) {
  Tensor t(dtype, shape);
  VisitDType(dtype, [&](auto zero) {
    using T = decltype(zero);
    T* p = t.data_as<T>();
    const int64_t n = t.num_elements();
    for (int64_t i = 0; i < n; ++i) {
      const int64_t v = static_cast<int64_t>(Mix(seed + i) % 17) - 8;
      p[i] = std::is_floating_point_v<T> ? static_cast<T>(v) / T(4)
                                         : static_cast<T>(v);
    }
  });
  return t;
}

// out[i] = f(a[i], b[i]) (or f(a[i], a[i]) without b), in a's dtype.
template <typename F>
Tensor Elementwise(const Tensor& a, const Tensor* b, F f) {
  Tensor out(a.dtype(), a.shape());
  VisitDType(a.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* x = a.data_as<T>();
    const T* y = b ? b->data_as<T>() : x;
    T* o = out.data_as<T>();
    for (int64_t i = 0; i < a.num_elements(); ++i) o[i] = f(x[i], y[i]);
  });
  return out;
}

Tensor Matmul(const Tensor& a, const Tensor& b) {
  const int64_t m = a.shape()[0], k = a.shape()[1], n = b.shape()[1];
  Tensor out(a.dtype(), {m, n});
  VisitDType(a.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* x = a.data_as<T>();
    const T* y = b.data_as<T>();
    T* o = out.data_as<T>();
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        T s = 0;
        for (int64_t l = 0; l < k; ++l) s += x[i * k + l] * y[l * n + j];
        o[i * n + j] = s;
      }
    }
  });
  return out;
}

// `a` seen as a rows x cols matrix, summed along `axis` (0: down the
// columns, giving cols values; 1: along the rows, giving rows values).
// sum(x, axis=1) of a matrix is Sum(x, m, n, 1); psum over `parts` devices
// of a vector split into `parts` blocks is Sum(x, parts, len, 0).
Tensor Sum(const Tensor& a, int64_t rows, int64_t cols, int axis) {
  Tensor out(a.dtype(), {axis == 0 ? cols : rows});
  VisitDType(a.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* x = a.data_as<T>();
    T* o = out.data_as<T>();
    for (int64_t i = 0; i < out.num_elements(); ++i) o[i] = 0;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c)
        o[axis == 0 ? c : r] += x[r * cols + c];
    }
  });
  return out;
}

bool SameArray(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.data(), b.data(), a.num_bytes()) == 0;
}

// One job of the mix: what to run and what must come back.
struct Case {
  std::string what;  // for messages, e.g. "psum float32[1024] over x=4"
  JobRequest job;
  std::vector<Tensor> args;
  Tensor expected;
  int64_t bytes = 0;     // input bytes
  bool put_get = false;  // Put args[0], Get it back, Delete it
};

PartitionSpec Spec(const char* text) { return *PartitionSpec::Parse(text); }

// The number of elements of an ordinary job: most are tiny, some medium,
// a few reach several MiB. Always a multiple of 16.
int64_t Elements(Rng& rng) {
  const int64_t u = rng.Uniform(0, 99);
  if (u < 70) return 16 * rng.Uniform(1, 16);     // 64 B .. 2 KiB
  if (u < 95) return 16 * rng.Uniform(64, 4096);  // 4 KiB .. 512 KiB
  return 16 * rng.Uniform(16384, 65536);          // 1 MiB .. 8 MiB
}

// Job `index`. Its kind, dtype and sizes depend on its place in a quarter
// only, so every quarter runs the same mix (and the same memory demand) in
// the same order; its values depend on `index`, so no two jobs move the
// same data.
Case MakeCase(const Options& o, int index) {
  const int place = index % std::max(1, o.jobs / 4);
  Rng rng(o.seed, place);
  const bool big = o.big_every > 0 && place % o.big_every == o.big_every / 2;
  const DType dtype = big ? DType::kFloat32
                          : rng.Pick({DType::kFloat32, DType::kFloat64,
                                      DType::kInt32, DType::kInt64});
  const int64_t n =
      big ? o.big_bytes / static_cast<int64_t>(ItemSize(dtype)) : Elements(rng);
  const uint64_t seed = Mix(o.seed ^ (uint64_t{0x5eed} << 32) ^ index);
  const Mesh line = *Mesh::Create({{"x", o.workers}});
  const Mesh square = *Mesh::Create({{"x", 2}, {"y", o.workers / 2}});
  // The kind of job, by ranges of 0..99; a big job is identity, psum,
  // all_gather or put/get.
  const int64_t kind =
      big ? rng.Pick<int64_t>({0, 70, 82, 92}) : rng.Uniform(0, 99);
  Case c;
  JobRequest& j = c.job;
  j.timeout = absl::Seconds(120);
  auto vector_arg = [&](int64_t len, uint64_t s) {
    c.args.push_back(SmallValues(dtype, {len}, s));
  };
  auto ids = [&](const char* fn, const Mesh& mesh) {
    j.function = fn;
    j.mesh = mesh;
  };
  if (kind < 25) {  // identity, 1-D over x or 2-D over x, y
    const bool two_d = !big && rng.Next() % 2;
    if (two_d) {
      ids("identity", square);
      c.args.push_back(
          SmallValues(dtype, {2 * (n / 16), 8 * (o.workers / 2)}, seed));
      j.in_specs = j.out_specs = {Spec("P('x', 'y')")};
    } else {
      ids("identity", line);
      vector_arg(n, seed);
      j.in_specs = j.out_specs = {Spec("P('x')")};
    }
    c.expected = c.args[0].Clone();
  } else if (kind < 45) {  // add, mul
    const bool add = kind < 37;
    ids(add ? "add" : "mul", rng.Next() % 2 ? line : square);
    vector_arg(n, seed);
    vector_arg(n, seed + 1);
    j.in_specs = j.out_specs = {
        Spec(j.mesh->num_axes() == 1 ? "P('x')" : "P(('x', 'y'))")};
    c.expected = add ? Elementwise(c.args[0], &c.args[1],
                                   [](auto a, auto b) { return a + b; })
                     : Elementwise(c.args[0], &c.args[1],
                                   [](auto a, auto b) { return a * b; });
  } else if (kind < 50) {  // scale by a power of two
    ids("scale", line);
    vector_arg(n, seed);
    j.in_specs = j.out_specs = {Spec("P('x')")};
    const bool fl = IsFloating(dtype);
    j.kwargs_json = fl ? R"({"alpha": 0.5})" : R"({"alpha": -2})";
    c.expected = Elementwise(c.args[0], nullptr, [fl](auto a, auto) {
      using T = decltype(a);
      return fl ? static_cast<T>(a / T(2)) : static_cast<T>(a * T(-2));
    });
  } else if (kind < 55) {  // relu
    ids("relu", square);
    vector_arg(n, seed);
    j.in_specs = j.out_specs = {Spec("P(('y', 'x'))")};
    c.expected = Elementwise(c.args[0], nullptr, [](auto a, auto) {
      return a > 0 ? a : decltype(a)(0);
    });
  } else if (kind < 65) {  // matmul on a 2-D mesh
    ids("matmul", square);
    const int64_t m = 2 * rng.Uniform(1, 48), k = rng.Uniform(1, 96),
                  nn = (o.workers / 2) * rng.Uniform(1, 48);
    c.args.push_back(SmallValues(dtype, {m, k}, seed));
    c.args.push_back(SmallValues(dtype, {k, nn}, seed + 1));
    j.in_specs = {Spec("P('x', None)"), Spec("P(None, 'y')")};
    j.out_specs = {Spec("P('x', 'y')")};
    c.expected = Matmul(c.args[0], c.args[1]);
  } else if (kind < 70) {  // sum over rows
    ids("sum", line);
    c.args.push_back(SmallValues(dtype, {o.workers * 4, n / 16}, seed));
    j.in_specs = {Spec("P('x', None)")};
    j.out_specs = {Spec("P('x')")};
    j.kwargs_json = R"({"axis": 1})";
    c.expected = Sum(c.args[0], o.workers * 4, n / 16, 1);
  } else if (kind < 82) {  // psum
    ids("psum", line);
    vector_arg(n, seed);
    j.in_specs = {Spec("P('x')")};
    j.out_specs = {Spec("P()")};
    j.kwargs_json = R"({"axes": "x"})";
    c.expected = Sum(c.args[0], o.workers, n / o.workers, 0);
  } else if (kind < 92) {  // all_gather, tiled
    ids("all_gather", line);
    vector_arg(n, seed);
    j.in_specs = {Spec("P('x')")};
    j.out_specs = {Spec("P()")};
    j.kwargs_json = R"({"axes": "x", "tiled": true})";
    c.expected = c.args[0].Clone();
  } else {  // resident put, get, rm
    c.put_get = true;
    vector_arg(n, seed);
    j.mesh = line;
    j.in_specs = {Spec("P('x')")};
    c.expected = c.args[0].Clone();
  }
  for (const Tensor& t : c.args) c.bytes += t.num_bytes();
  c.what = absl::StrCat(c.put_get ? "put/get" : j.function, " ",
                        ShapeString(dtype, c.args[0].shape()), " on ",
                        j.mesh->ToString(), " (job ", index, ")");
  return c;
}

// Runs `c` and compares the result; an error names the job.
absl::Status RunCase(const ShardClient& client, Case& c, int index) {
  Tensor got;
  if (c.put_get) {
    const std::string name = absl::StrCat("load/", index);
    auto put = client.Put(name, c.args[0], *c.job.mesh, c.job.in_specs[0]);
    if (!put.ok()) return put.status();
    auto get = client.Get(name);
    if (!get.ok()) return get.status();
    got = *std::move(get);
    absl::Status rm = client.Delete(name);
    if (!rm.ok()) return rm;
  } else {
    for (const Tensor& t : c.args) c.job.args.push_back(&t);
    auto r = client.Run(c.job);
    if (!r.ok()) return r.status();
    if (r->outputs.size() != 1) {
      return absl::InternalError(
          absl::StrCat(r->outputs.size(), " outputs instead of 1"));
    }
    got = std::move(r->outputs[0]);
  }
  if (!SameArray(got, c.expected)) {
    return absl::InternalError(
        absl::StrCat("result ", ShapeString(got.dtype(), got.shape()),
                     " differs from the reference ",
                     ShapeString(c.expected.dtype(), c.expected.shape())));
  }
  return absl::OkStatus();
}

// VmRSS of the cluster's processes, sampled against the number of jobs done.
class RssSampler {
 public:
  RssSampler(std::vector<pid_t> pids, const std::atomic<int>* done)
      : pids_(std::move(pids)), done_(done) {
    thread_ = std::thread([this] {
      while (!stop_) {
        Sample s{done_->load(), {}};
        for (pid_t p : pids_) s.kb.push_back(ReadRssKb(p));
        {
          std::lock_guard<std::mutex> l(mu_);
          samples_.push_back(std::move(s));
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    });
  }
  void Stop() {
    stop_ = true;
    thread_.join();
  }
  // Mean and max of process `p`'s RSS (KiB) over samples taken while
  // [from, to) jobs were done.
  std::pair<double, long> Stats(size_t p, int from, int to) const {
    double sum = 0;
    long max = 0, n = 0;
    for (const Sample& s : samples_) {
      if (s.done < from || s.done >= to || s.kb[p] < 0) continue;
      sum += s.kb[p];
      max = std::max(max, s.kb[p]);
      ++n;
    }
    return {n ? sum / n : 0, max};
  }

 private:
  struct Sample {
    int done;
    std::vector<long> kb;
  };
  const std::vector<pid_t> pids_;
  const std::atomic<int>* done_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::vector<Sample> samples_;
  std::thread thread_;
};

int Run(const Options& o) {
  LocalCluster::Options co;
  co.num_workers = o.workers;
  co.start_timeout = absl::Seconds(60);
  auto cluster = LocalCluster::Start(co);
  if (!cluster.ok()) {
    std::fprintf(stderr, "load_test: %s\n",
                 cluster.status().ToString().c_str());
    return 1;
  }
  std::vector<pid_t> pids = {(*cluster)->coordinator_pid()};
  for (pid_t p : (*cluster)->worker_pids()) pids.push_back(p);

  std::vector<std::unique_ptr<ShardClient>> clients;
  for (int t = 0; t < o.clients; ++t) {
    auto client = ShardClient::Create({(*cluster)->address(), absl::Seconds(10),
                                       (*cluster)->client_security()});
    if (!client.ok()) {
      std::fprintf(stderr, "load_test: %s\n",
                   client.status().ToString().c_str());
      return 1;
    }
    clients.push_back(*std::move(client));
  }

  std::atomic<int> done{0}, failed{0};
  std::atomic<int64_t> bytes{0};
  std::mutex mu;
  std::vector<double> latency_ms;
  std::vector<std::string> errors;
  // Runs jobs [begin, end) from every client at once; `measured` jobs
  // count in the figures.
  auto run_jobs = [&](int begin, int end, bool measured) {
    std::atomic<int> next{begin};
    std::vector<std::thread> threads;
    for (int t = 0; t < o.clients; ++t) {
      threads.emplace_back([&, t] {
        for (int i; (i = next++) < end;) {
          Case c = MakeCase(o, i);
          const auto start = Clock::now();
          absl::Status s = RunCase(*clients[t], c, i);
          const double ms =
              std::chrono::duration<double, std::milli>(Clock::now() - start)
                  .count();
          std::lock_guard<std::mutex> l(mu);
          if (!s.ok()) {
            ++failed;
            if (errors.size() < 20)
              errors.push_back(c.what + ": " + s.ToString());
          }
          if (measured) {
            bytes += c.bytes;
            latency_ms.push_back(ms);
            ++done;
          }
        }
      });
    }
    for (auto& t : threads) t.join();
  };
  // The warm-up (thread pools, connections and allocator arenas reach
  // their working size) is neither timed nor measured; its jobs are
  // numbered after the measured ones, so they are other jobs of the mix.
  run_jobs(o.jobs, o.jobs + o.warmup, false);

  // The measured jobs run in four quarters; between two, every client
  // waits, and once the servers are idle each one's RSS is read: what a
  // quarter leaves behind (leaks, memory the allocator keeps), without the
  // arrays in flight.
  std::vector<std::vector<long>> idle_kb;
  RssSampler sampler(pids, &done);
  double seconds = 0;
  for (int quarter = 1; quarter <= 4; ++quarter) {
    const auto t0 = Clock::now();
    run_jobs(o.jobs * (quarter - 1) / 4, o.jobs * quarter / 4, true);
    seconds += std::chrono::duration<double>(Clock::now() - t0).count();
    if (quarter < 4 || !o.check_rss) {
      idle_kb.push_back(SettledRssKb(pids, kSettle, kIdleLimit));
      continue;
    }
    // Back within bounds of the first quarter's idle RSS, each process and
    // the cluster, within kIdleLimit: a bounded poll, not a fixed moment.
    const std::vector<long>& first = idle_kb[0];
    bool met = false;
    double waited = 0;
    idle_kb.push_back(WaitForRssKb(
        pids,
        [&](const std::vector<long>& now) {
          long total_first = 0, total_now = 0;
          for (size_t p = 0; p < now.size(); ++p) {
            total_first += first[p];
            total_now += now[p];
          }
          return WithinIdleBounds(first, now, o.max_rss_growth,
                                  o.rss_slack_mib * 1024.0) &&
                 total_now <= (1 + o.max_rss_growth) * total_first;
        },
        kIdleLimit, &met, &waited));
    std::printf("idle RSS %s within bounds %.1f s after the last job\n",
                met ? "came back" : "did NOT come back", waited);
  }
  sampler.Stop();

  std::sort(latency_ms.begin(), latency_ms.end());
  auto pct = [&](double p) {
    return latency_ms.empty()
               ? 0.0
               : latency_ms[std::min(
                     latency_ms.size() - 1,
                     static_cast<size_t>(p * latency_ms.size()))];
  };
  std::printf(
      "load: %d jobs (%.1f MiB in) from %d clients on %d workers in %.1f s: "
      "%.1f jobs/s, latency p50 %.2f ms, p99 %.2f ms, max %.2f ms; %d "
      "failed\n",
      o.jobs, bytes / 1048576.0, o.clients, o.workers, seconds,
      o.jobs / seconds, pct(0.5), pct(0.99),
      latency_ms.empty() ? 0.0 : latency_ms.back(), failed.load());
  for (const std::string& e : errors) std::printf("  error: %s\n", e.c_str());

  bool rss_ok = true;
  const int q = o.jobs / 4;
  double total_first = 0, total_last = 0;
  for (size_t p = 0; p < pids.size(); ++p) {
    const std::string name =
        p == 0 ? "coordinator" : absl::StrCat("worker ", p - 1);
    const auto first = sampler.Stats(p, 0, q);
    const auto last = sampler.Stats(p, o.jobs - q, o.jobs);
    const double idle_first = idle_kb[0][p], idle_last = idle_kb[3][p];
    total_first += idle_first;
    total_last += idle_last;
    const double growth = idle_first > 0 ? idle_last / idle_first - 1 : 1;
    const double allowed_kb =
        std::max(o.max_rss_growth * idle_first, o.rss_slack_mib * 1024.0);
    const bool ok = !o.check_rss || (idle_first > 0 && idle_last > 0 &&
                                     idle_last - idle_first <= allowed_kb);
    rss_ok = rss_ok && ok;
    std::printf(
        "rss %-12s idle after quarters 1-4: %.1f %.1f %.1f %.1f MiB "
        "(%+.1f%%, %+.1f MiB%s; now anon %.1f, file %.1f, shmem %.1f MiB); "
        "while running, first quarter mean %.1f max %.1f, last quarter mean "
        "%.1f max %.1f MiB\n",
        name.c_str(), idle_kb[0][p] / 1024.0, idle_kb[1][p] / 1024.0,
        idle_kb[2][p] / 1024.0, idle_kb[3][p] / 1024.0, 100 * growth,
        (idle_last - idle_first) / 1024,
        ok ? "" : absl::StrFormat(", OVER %.1f MiB", allowed_kb / 1024).c_str(),
        shardmap_bench::ReadStatusKb(pids[p], "RssAnon:") / 1024.0,
        shardmap_bench::ReadStatusKb(pids[p], "RssFile:") / 1024.0,
        shardmap_bench::ReadStatusKb(pids[p], "RssShmem:") / 1024.0,
        first.first / 1024, first.second / 1024.0, last.first / 1024,
        last.second / 1024.0);
  }
  const double total_growth = total_last / total_first - 1;
  const bool total_ok = !o.check_rss || total_growth <= o.max_rss_growth;
  rss_ok = rss_ok && total_ok;
  std::printf(
      "rss cluster      idle after quarter 1 %.1f MiB, after quarter "
      "4 %.1f MiB (%+.1f%%%s)\n",
      total_first / 1024, total_last / 1024, 100 * total_growth,
      total_ok
          ? ""
          : absl::StrFormat(", OVER %.0f%%", 100 * o.max_rss_growth).c_str());
  return ReportVerdict("load_test", failed == 0 && rss_ok);
}

}  // namespace
}  // namespace shardmap

int main(int argc, char** argv) {
  shardmap::Options o;
  const std::optional<int> parsed = shardmap::ParseLoadFlags(
      argc, argv,
      "load_test: concurrent clients run mixed jobs on a local cluster; "
      "every result is checked and the servers' RSS must stay flat",
      2, o, [&o](CLI::App& app) {
        app.add_option("--clients", o.clients, "concurrent clients")
            ->capture_default_str();
        app.add_option("--jobs", o.jobs, "jobs measured")
            ->capture_default_str();
        app.add_option("--warmup", o.warmup, "jobs run first, not measured")
            ->capture_default_str();
        app.add_option("--big-every", o.big_every,
                       "one job in this many moves --big-bytes (0: none)")
            ->capture_default_str();
        app.add_option("--big-bytes", o.big_bytes, "bytes of a big job's input")
            ->capture_default_str();
        app.add_flag("--no-rss-check{false}", o.check_rss,
                     "report the RSS figures without failing on them");
        app.add_option("--seed", o.seed, "seed of the job mix")
            ->capture_default_str();
      });
  if (parsed) return *parsed;
  if (o.workers % 2 != 0) {
    std::fprintf(stderr, "load_test: --workers must be even\n");
    return 64;
  }
  return shardmap::Run(o);
}
