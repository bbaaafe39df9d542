// The built-in functions' kernels at sizes where compute shows, called as a
// worker calls them (Google Benchmark): ShardExecutor::Run over a registry
// holding the built-ins - lookup, the signature check, the kernel, the
// output count. No network, no communicator, one thread.
//
//   identity16   identity on 16 float32: the per-call overhead
//   add, mul     4M float32 (16 MiB) + the same shape / * a row [1024]
//   scale, relu  4M float32 (in place)
//   sum_axis0    jnp.sum(x, axis=0) over [2048, 2048] float32
//   matmul       [512, 512] @ [512, 512] float32
//
// The arguments are copied in with the clock paused (a kernel may consume
// them). Besides Google Benchmark's table, prints one line per case for
// bench/run.sh: "RESULT impl=builtin op=NAME n=1 bytes=B iters=I
// median_us=T cpu_us=C" (the median over --benchmark_repetitions).
//
// `builtin_bench --signatures` prints every built-in's registered signature
// (test functions included) as protobuf text instead: two builds' outputs
// diff to nothing when their built-ins declare the same.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "bench/result_reporter.h"
#include "core/tensor.h"
#include "worker/functions/function_registry.h"
#include "worker/shard_executor.h"

namespace shardmap {
namespace {

constexpr int64_t kElems = 1 << 22;
constexpr int64_t kRows = 4096, kCols = 1024;  // kRows * kCols = kElems
constexpr int64_t kSumSide = 2048;
constexpr int64_t kMat = 512;

Tensor Random(Shape shape, unsigned seed) {
  Tensor t(DType::kFloat32, std::move(shape));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-2, 2);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data_as<float>()[i] = u(rng);
  return t;
}

const ShardExecutor& Executor() {
  static const FunctionRegistry* registry = [] {
    auto* r = new FunctionRegistry;
    RegisterBuiltins(*r);
    return r;
  }();
  static const ShardExecutor* executor = new ShardExecutor(registry);
  return *executor;
}

// The input bytes of each case, for the RESULT lines.
std::map<std::string, int64_t>& Bytes() {
  static auto* bytes = new std::map<std::string, int64_t>;
  return *bytes;
}

void RunCall(benchmark::State& state, const std::string& name,
             const std::string& fn, const std::vector<const Tensor*>& inputs,
             const std::string& kwargs = "") {
  int64_t bytes = 0;
  for (const Tensor* t : inputs) bytes += t->num_bytes();
  Bytes()[name] = bytes;
  for (auto _ : state) {
    state.PauseTiming();
    ShardCall call;
    call.function = fn;
    call.kwargs_json = kwargs;
    for (const Tensor* t : inputs) call.args.push_back(t->Clone());
    state.ResumeTiming();
    auto out = Executor().Run(std::move(call));
    if (!out.ok()) {
      state.SkipWithError(out.status().ToString().c_str());
      break;
    }
    benchmark::DoNotOptimize((*out)[0].data());
  }
}

void BM_identity16(benchmark::State& state) {
  const Tensor x = Random({16}, 1);
  RunCall(state, "identity16", "identity", {&x});
}

void BM_add(benchmark::State& state) {
  const Tensor x = Random({kRows, kCols}, 1), y = Random({kRows, kCols}, 2);
  RunCall(state, "add", "add", {&x, &y});
}

void BM_mul(benchmark::State& state) {
  const Tensor x = Random({kRows, kCols}, 1), y = Random({kCols}, 2);
  RunCall(state, "mul", "mul", {&x, &y});
}

void BM_scale(benchmark::State& state) {
  const Tensor x = Random({kElems}, 1);
  RunCall(state, "scale", "scale", {&x}, R"({"alpha": 0.5})");
}

void BM_relu(benchmark::State& state) {
  const Tensor x = Random({kElems}, 1);
  RunCall(state, "relu", "relu", {&x});
}

void BM_sum_axis0(benchmark::State& state) {
  const Tensor x = Random({kSumSide, kSumSide}, 1);
  RunCall(state, "sum_axis0", "sum", {&x}, R"({"axis": 0})");
}

void BM_matmul(benchmark::State& state) {
  const Tensor a = Random({kMat, kMat}, 1), b = Random({kMat, kMat}, 2);
  RunCall(state, "matmul", "matmul", {&a, &b});
}

BENCHMARK(BM_identity16)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_add)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_mul)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_scale)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_relu)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_sum_axis0)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_matmul)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace
}  // namespace shardmap

int main(int argc, char** argv) {
  if (argc == 2 && std::string(argv[1]) == "--signatures") {
    shardmap::FunctionRegistry registry;
    shardmap::RegisterBuiltins(registry);
    shardmap::RegisterCollectiveBuiltins(registry);
    shardmap::RegisterStateBuiltins(registry);
    shardmap::RegisterTestBuiltins(registry);
    for (const auto& sig : registry.Signatures()) {
      std::printf("%s\n", sig.DebugString().c_str());
    }
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 64;
  shardmap_bench::ResultReporter reporter([](const std::string& name,
                                             int64_t iters, double real_us,
                                             double cpu_us) {
    const std::string op = name.substr(3);  // BM_<op>
    std::printf(
        "RESULT impl=builtin op=%s n=1 bytes=%lld iters=%lld "
        "median_us=%.1f cpu_us=%.1f\n",
        op.c_str(), static_cast<long long>(shardmap::Bytes()[op]),
        static_cast<long long>(iters), real_us, cpu_us);
  });
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
