// mpi_bench: the OpenMPI reference for bench/run.sh. Times MPI_Allreduce
// (float32 sum), MPI_Allgather, or a cyclic shift with MPI_Sendrecv (what
// shardmap's ppermute with perm [(i, i+1 mod N)] does), with the method of
// docs/BENCHMARKS.md: a barrier before every iteration, the iteration's time
// is the slowest rank's, the median over iterations is reported; results
// are checked once per size.
//
// Built by bench/run.sh with mpicxx (not part of the CMake build):
//   mpirun -np 4 mpi_bench LABEL allreduce|allgather|sendrecv SIZES [SCALE]
// SIZES: comma-separated bytes, per rank (allreduce, sendrecv) or gathered
// total (allgather). Rank 0 prints one RESULT line per size.
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/bench_util.h"

namespace {

using shardmap_bench::Iterations;
using shardmap_bench::ReadHwmKb;

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (argc < 4) {
    if (rank == 0) {
      std::fprintf(stderr,
                   "usage: mpi_bench LABEL allreduce|allgather|sendrecv "
                   "SIZES [SCALE]\n");
    }
    MPI_Finalize();
    return 64;
  }
  const std::string label = argv[1];
  const std::string op = argv[2];
  std::vector<long long> sizes;
  for (char* s = std::strtok(argv[3], ","); s; s = std::strtok(nullptr, ",")) {
    sizes.push_back(std::atoll(s));
  }
  const double scale = argc > 4 ? std::atof(argv[4]) : 1.0;
  if (op != "allreduce" && op != "allgather" && op != "sendrecv") {
    if (rank == 0) std::fprintf(stderr, "unknown op %s\n", op.c_str());
    MPI_Abort(MPI_COMM_WORLD, 64);
  }
  int bad = 0;
  for (long long size : sizes) {
    // Elements each rank sends, and the output's.
    const long long in_count =
        std::max(1LL, (op == "allgather" ? size / n : size) / 4);
    const long long out_count = op == "allgather" ? in_count * n : in_count;
    std::vector<float> in(in_count, static_cast<float>(rank + 1));
    std::vector<float> out(out_count, 0.0f);
    int warmup, iters;
    Iterations(size, scale, &warmup, &iters);
    const int right = (rank + 1) % n, left = (rank + n - 1) % n;
    std::vector<double> mine(iters), slowest(iters);
    for (int it = -1; it < warmup + iters; ++it) {
      // it == -1: the checked run.
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = MPI_Wtime();
      if (op == "allreduce") {
        MPI_Allreduce(in.data(), out.data(), static_cast<int>(in_count),
                      MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      } else if (op == "allgather") {
        MPI_Allgather(in.data(), static_cast<int>(in_count), MPI_FLOAT,
                      out.data(), static_cast<int>(in_count), MPI_FLOAT,
                      MPI_COMM_WORLD);
      } else {
        MPI_Sendrecv(in.data(), static_cast<int>(in_count), MPI_FLOAT, right, 7,
                     out.data(), static_cast<int>(in_count), MPI_FLOAT, left, 7,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      }
      const double t = MPI_Wtime() - t0;
      if (it >= warmup) mine[it - warmup] = t;
      if (it == -1) {
        for (long long i = 0; i < out_count; ++i) {
          float want = op == "allreduce" ? n * (n + 1) / 2.0f
                       : op == "allgather"
                           ? static_cast<float>(i / in_count + 1)
                           : static_cast<float>(left + 1);
          if (out[i] != want) {
            std::fprintf(stderr, "rank %d: %s %lld B wrong at %lld: %g != %g\n",
                         rank, op.c_str(), size, i, out[i], want);
            bad = 1;
            break;
          }
        }
      }
    }
    MPI_Reduce(mine.data(), slowest.data(), iters, MPI_DOUBLE, MPI_MAX, 0,
               MPI_COMM_WORLD);
    int any_bad = 0;
    MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    long hwm = ReadHwmKb();
    std::vector<long> hwms(n);
    MPI_Gather(&hwm, 1, MPI_LONG, hwms.data(), 1, MPI_LONG, 0, MPI_COMM_WORLD);
    if (any_bad) {
      MPI_Finalize();
      return 1;
    }
    if (rank == 0) {
      for (double& s : slowest) s *= 1e6;
      std::sort(slowest.begin(), slowest.end());
      const size_t p90 =
          std::min(slowest.size() - 1, (slowest.size() * 9 + 9) / 10 - 1);
      std::string rss;
      for (int r = 0; r < n; ++r) {
        rss += (r ? "," : "") + std::to_string(hwms[r]);
      }
      std::printf(
          "RESULT impl=%s op=%s n=%d bytes=%lld iters=%d median_us=%.2f "
          "min_us=%.2f max_us=%.2f p90_us=%.2f algo=%s rss_kb=%s\n",
          label.c_str(), op.c_str(), n, size, iters,
          slowest[slowest.size() / 2], slowest.front(), slowest.back(),
          slowest[p90], op == "sendrecv" ? "sendrecv_shift" : "ompi_tuned",
          rss.c_str());
      std::fflush(stdout);
    }
  }
  MPI_Finalize();
  return 0;
}
