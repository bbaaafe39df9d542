// gloo_bench: the Gloo reference for bench/run.sh. One process per rank;
// times gloo::allreduce with the ring algorithm (reduce-scatter then
// all-gather, float32 sum) over Gloo's TCP transport bound to 127.0.0.1,
// with the method of docs/BENCHMARKS.md: gloo::barrier before every
// iteration, the iteration's time is the slowest rank's (an allreduce-max
// of the timings afterwards), the median over iterations is reported;
// results are checked once per size.
//
// Built by bench/run.sh with g++ -lgloo (not part of the CMake build):
//   dir=$(mktemp -d)
//   for r in 0 1 2 3; do gloo_bench $r 4 $dir SIZES [SCALE] & done; wait
// Rank 0 prints one RESULT line per size.
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench_util.h"

namespace {

using shardmap_bench::Iterations;
using shardmap_bench::ReadHwmKb;

using ReduceFn = void (*)(void*, const void*, const void*, size_t);

int Run(int rank, int n, const std::string& dir,
        const std::vector<long long>& sizes, double scale) {
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  attr.ai_family = AF_INET;
  auto device = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore store(dir);
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, n);
  context->setTimeout(std::chrono::seconds(60));
  context->connectFullMesh(store, device);
  uint32_t tag = 0;
  for (long long size : sizes) {
    const size_t count = std::max(1LL, size / 4);
    std::vector<float> in(count, static_cast<float>(rank + 1));
    std::vector<float> out(count, 0.0f);
    int warmup, iters;
    Iterations(size, scale, &warmup, &iters);
    std::vector<double> seconds(iters);
    for (int it = -1; it < warmup + iters; ++it) {
      gloo::BarrierOptions barrier(context);
      gloo::barrier(barrier);
      const auto t0 = std::chrono::steady_clock::now();
      gloo::AllreduceOptions opts(context);
      opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
      opts.setInput(in.data(), count);
      opts.setOutput(out.data(), count);
      opts.setReduceFunction(static_cast<ReduceFn>(&gloo::sum<float>));
      opts.setTag(tag++);
      gloo::allreduce(opts);
      const double t =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
              .count();
      if (it >= warmup) seconds[it - warmup] = t;
      if (it == -1) {
        const float want = n * (n + 1) / 2.0f;
        for (size_t i = 0; i < count; ++i) {
          if (out[i] != want) {
            std::fprintf(stderr, "rank %d: %lld B wrong at %zu: %g != %g\n",
                         rank, size, i, out[i], want);
            return 1;
          }
        }
      }
    }
    // The slowest rank of each iteration.
    gloo::AllreduceOptions mx(context);
    mx.setOutput(seconds.data(), seconds.size());
    mx.setReduceFunction(static_cast<ReduceFn>(&gloo::max<double>));
    mx.setTag(tag++);
    gloo::allreduce(mx);
    std::vector<double> hwm = {static_cast<double>(ReadHwmKb())};
    std::vector<double> hwms(n, 0.0);
    hwms[rank] = hwm[0];
    gloo::AllreduceOptions hw(context);
    hw.setOutput(hwms.data(), hwms.size());
    hw.setReduceFunction(static_cast<ReduceFn>(&gloo::max<double>));
    hw.setTag(tag++);
    gloo::allreduce(hw);
    if (rank == 0) {
      for (double& s : seconds) s *= 1e6;
      std::sort(seconds.begin(), seconds.end());
      const size_t p90 =
          std::min(seconds.size() - 1, (seconds.size() * 9 + 9) / 10 - 1);
      std::string rss;
      for (int r = 0; r < n; ++r) {
        rss += (r ? "," : "") + std::to_string(static_cast<long>(hwms[r]));
      }
      std::printf(
          "RESULT impl=gloo-ring op=allreduce n=%d bytes=%lld iters=%d "
          "median_us=%.2f min_us=%.2f max_us=%.2f p90_us=%.2f algo=ring "
          "rss_kb=%s\n",
          n, size, iters, seconds[seconds.size() / 2], seconds.front(),
          seconds.back(), seconds[p90], rss.c_str());
      std::fflush(stdout);
    }
  }
  gloo::BarrierOptions done(context);
  gloo::barrier(done);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: gloo_bench RANK N DIR SIZES [SCALE]\n");
    return 64;
  }
  const int rank = std::atoi(argv[1]);
  const int n = std::atoi(argv[2]);
  std::vector<long long> sizes;
  for (char* s = std::strtok(argv[4], ","); s; s = std::strtok(nullptr, ",")) {
    sizes.push_back(std::atoll(s));
  }
  const double scale = argc > 5 ? std::atof(argv[5]) : 1.0;
  try {
    return Run(rank, n, argv[3], sizes, scale);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gloo_bench rank %d: %s\n", rank, e.what());
    return 1;
  }
}
