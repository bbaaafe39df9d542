// Expression programs (issue 13) against native code, side by side in one
// run (Google Benchmark):
//   chain10: y = tanh(x * 0.5 + 0.25) * sigmoid(x) - exp(-x * x) / (1 + |x|)
//            (12 elementwise ops) over 1M float32, through program::Evaluate
//            (fused), as a hand-written C++ loop, and as one Eigen array
//            expression (impl=eigen: vectorized, fused by Eigen);
//   mlp:     relu(x @ w1) @ w2 with x 512x1024, w1 and w2 1024x1024 float32,
//            through Evaluate and as direct Eigen calls.
// Besides Google Benchmark's table, prints one line per case for
// bench/run.sh: "RESULT impl=program|native|eigen op=chain10|mlp n=1 bytes=B
// iters=I median_us=T cpu_us=C" (the median over --benchmark_repetitions,
// wall and CPU time of one iteration; both sides run on one thread).
#include <benchmark/benchmark.h>

#include <Eigen/Core>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "bench/result_reporter.h"
#include "core/tensor.h"
#include "program/evaluator.h"
#include "tests/unit/program_builder.h"

namespace shardmap {
namespace program {
namespace {

constexpr int64_t kChainSize = 1 << 20;
constexpr int64_t kM = 512, kK = 1024, kN = 1024;
constexpr ElemType kF32 = ElemType::kFloat32;

Tensor Random(Shape shape, unsigned seed) {
  Tensor t(shardmap::DType::kFloat32, std::move(shape));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-2, 2);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data_as<float>()[i] = u(rng);
  return t;
}

Program ChainProgram() {
  ProgramBuilder b;
  const int x = b.Param(kF32, {kChainSize});
  const int one = b.Constant(kF32, {}, 1);
  const int t =
      b.Unary(OpCode::kTanh,
              b.Binary(OpCode::kAdd,
                       b.Binary(OpCode::kMul, x, b.Constant(kF32, {}, 0.5)),
                       b.Constant(kF32, {}, 0.25)));
  const int s = b.Binary(OpCode::kMul, t, b.Unary(OpCode::kSigmoid, x));
  const int g = b.Unary(OpCode::kExp,
                        b.Unary(OpCode::kNeg, b.Binary(OpCode::kMul, x, x)));
  const int d = b.Binary(OpCode::kAdd, one, b.Unary(OpCode::kAbs, x));
  return b.Build(b.Binary(OpCode::kSub, s, b.Binary(OpCode::kDiv, g, d)));
}

// Times Evaluate alone: the arguments are copied in with the clock paused.
void RunProgram(benchmark::State& state, const Program& program,
                const std::vector<const Tensor*>& inputs) {
  for (auto _ : state) {
    state.PauseTiming();
    std::vector<Tensor> args;
    for (const Tensor* t : inputs) args.push_back(t->Clone());
    state.ResumeTiming();
    auto out = Evaluate(program, std::move(args), nullptr);
    if (!out.ok()) {
      state.SkipWithError(out.status().ToString().c_str());
      break;
    }
    benchmark::DoNotOptimize((*out)[0].data());
  }
}

void BM_Chain10Program(benchmark::State& state) {
  const Tensor x = Random({kChainSize}, 1);
  RunProgram(state, ChainProgram(), {&x});
}

void BM_Chain10Native(benchmark::State& state) {
  const Tensor x = Random({kChainSize}, 1);
  for (auto _ : state) {
    Tensor y(shardmap::DType::kFloat32, {kChainSize});
    const float* xd = x.data_as<float>();
    float* yd = y.data_as<float>();
    for (int64_t i = 0; i < kChainSize; ++i) {
      const float v = xd[i];
      yd[i] = std::tanh(v * 0.5f + 0.25f) * (1.0f / (1.0f + std::exp(-v))) -
              std::exp(-v * v) / (1.0f + std::abs(v));
    }
    benchmark::DoNotOptimize(y.data());
  }
}

// The chain as one Eigen array expression: vectorized and fused by Eigen's
// expression templates, the best a native author would do without SIMD
// intrinsics.
void BM_Chain10Eigen(benchmark::State& state) {
  using A = Eigen::Array<float, Eigen::Dynamic, 1>;
  const Tensor xt = Random({kChainSize}, 1);
  Eigen::Map<const A> x(xt.data_as<float>(), kChainSize);
  for (auto _ : state) {
    Tensor yt(shardmap::DType::kFloat32, {kChainSize});
    Eigen::Map<A> y(yt.data_as<float>(), kChainSize);
    y = (x * 0.5f + 0.25f).tanh() * x.logistic() -
        (-x * x).exp() / (1.0f + x.abs());
    benchmark::DoNotOptimize(yt.data());
  }
}

void BM_MlpProgram(benchmark::State& state) {
  ProgramBuilder b;
  const int x = b.Param(kF32, {kM, kK});
  const int w1 = b.Param(kF32, {kK, kN});
  const int w2 = b.Param(kF32, {kN, kN});
  const Program program =
      b.Build(b.MatMul(b.Unary(OpCode::kRelu, b.MatMul(x, w1)), w2));
  const Tensor xt = Random({kM, kK}, 2), w1t = Random({kK, kN}, 3),
               w2t = Random({kN, kN}, 4);
  RunProgram(state, program, {&xt, &w1t, &w2t});
}

void BM_MlpNative(benchmark::State& state) {
  using M =
      Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const Tensor xt = Random({kM, kK}, 2), w1t = Random({kK, kN}, 3),
               w2t = Random({kN, kN}, 4);
  Eigen::Map<const M> x(xt.data_as<float>(), kM, kK);
  Eigen::Map<const M> w1(w1t.data_as<float>(), kK, kN);
  Eigen::Map<const M> w2(w2t.data_as<float>(), kN, kN);
  for (auto _ : state) {
    M h(kM, kN), y(kM, kN);
    h.noalias() = x * w1;
    h = h.cwiseMax(0.0f);
    y.noalias() = h * w2;
    benchmark::DoNotOptimize(y.data());
  }
}

BENCHMARK(BM_Chain10Program)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_Chain10Native)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_Chain10Eigen)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_MlpProgram)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_MlpNative)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace
}  // namespace program
}  // namespace shardmap

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 64;
  using shardmap::program::kChainSize;
  using shardmap::program::kM;
  using shardmap::program::kN;
  shardmap_bench::ResultReporter reporter([](const std::string& name,
                                             int64_t iters, double real_us,
                                             double cpu_us) {
    const bool chain = name.find("Chain10") != std::string::npos;
    const char* impl = name.find("Program") != std::string::npos ? "program"
                       : name.find("Eigen") != std::string::npos ? "eigen"
                                                                 : "native";
    std::printf(
        "RESULT impl=%s op=%s n=1 bytes=%lld iters=%lld median_us=%.1f "
        "cpu_us=%.1f\n",
        impl, chain ? "chain10" : "mlp",
        static_cast<long long>(chain ? kChainSize * 4 : kM * kN * 4),
        static_cast<long long>(iters), real_us, cpu_us);
  });
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
