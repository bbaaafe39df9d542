// A Google Benchmark reporter for bench/run.sh: Google Benchmark's console
// table, plus one RESULT line per case, written by the benchmark's own
// `line` callback from the case's median over --benchmark_repetitions (or
// its single run). Used from the benchmark's main thread only.
#ifndef SHARDMAP_BENCH_RESULT_REPORTER_H_
#define SHARDMAP_BENCH_RESULT_REPORTER_H_

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace shardmap_bench {

class ResultReporter : public benchmark::ConsoleReporter {
 public:
  // line(function name, timed iterations over all repetitions, wall µs and
  // CPU µs of one iteration) prints the case's RESULT line.
  using Line = std::function<void(const std::string& name, int64_t iters,
                                  double real_us, double cpu_us)>;

  // No colour codes: run.sh reads lines that start with RESULT.
  explicit ResultReporter(Line line)
      : ConsoleReporter(OO_Tabular), line_(std::move(line)) {}

  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      if (run.run_type == Run::RT_Iteration) {
        iterations_[run.run_name.function_name] += run.iterations;
      }
    }
    for (const Run& run : runs) {
      const bool single =
          run.repetitions <= 1 && run.run_type == Run::RT_Iteration;
      const bool median =
          run.run_type == Run::RT_Aggregate && run.aggregate_name == "median";
      if (run.error_occurred || !(single || median)) continue;
      const std::string& name = run.run_name.function_name;
      line_(name, iterations_[name], run.GetAdjustedRealTime(),
            run.GetAdjustedCPUTime());
      std::fflush(stdout);
    }
  }

 private:
  Line line_;
  std::map<std::string, int64_t> iterations_;
};

}  // namespace shardmap_bench

#endif  // SHARDMAP_BENCH_RESULT_REPORTER_H_
