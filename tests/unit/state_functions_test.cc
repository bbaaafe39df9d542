// Tests of the built-in functions with state slots
// (worker/functions/state_functions.cc), called as a worker calls them:
// registry.Find, CheckCall (which fills in keyword defaults), then the
// kernel, with CallContext::states pointing at a map the test owns.
//
// References are written here from the definitions, independently of the
// kernels: accumulate against a plain loop; linear_sgd_step against a
// single-process gradient step over the whole batch, and after training
// against the least-squares solution from the normal equations. The
// data-parallel step runs on 4 devices as threads over an InMemoryHub, each
// with its own Communicator, as communicator_test does.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/dtype.h"
#include "core/mesh.h"
#include "core/tensor.h"
#include "tests/fakes/in_memory_peer_transport.h"
#include "tests/unit/status_matchers.h"
#include "tests/unit/test_arrays.h"
#include "wire/signature.h"
#include "worker/collectives/communicator.h"
#include "worker/functions/function_registry.h"
#include "worker/shard_executor.h"

namespace shardmap {
namespace {

using json = nlohmann::json;
using States = std::map<std::string, Tensor>;

// ---------------------------------------------------------------------------
// Helpers

FunctionRegistry& Registry() {
  static FunctionRegistry* registry = [] {
    auto* r = new FunctionRegistry;
    RegisterStateBuiltins(*r);
    return r;
  }();
  return *registry;
}

// Calls `fn` as a worker does, through the worker's own ShardExecutor.
absl::StatusOr<std::vector<Tensor>> Call(const std::string& fn,
                                         const CallContext& ctx,
                                         std::vector<Tensor> args,
                                         const std::string& kwargs = "") {
  ShardCall call;
  call.function = fn;
  if (ctx.mesh != nullptr) call.mesh = *ctx.mesh;
  call.device_id = ctx.device_id;
  call.args = std::move(args);
  call.kwargs_json = kwargs;
  return ShardExecutor(&Registry()).Run(std::move(call), ctx.comm, ctx.states);
}

// Uniform in [-1, 1), from (seed, i).
double Uniform(uint64_t seed, uint64_t i) {
  return static_cast<double>(Mix(seed * 1000003 + i) >> 11) * 0x1.0p-52 - 1.0;
}

::testing::AssertionResult SameBytes(const Tensor& got, const Tensor& want) {
  if (got.dtype() != want.dtype() || got.shape() != want.shape()) {
    return ::testing::AssertionFailure()
           << "got " << ShapeString(got.dtype(), got.shape()) << ", want "
           << ShapeString(want.dtype(), want.shape());
  }
  if (std::memcmp(got.data(), want.data(), got.num_bytes()) != 0) {
    return ::testing::AssertionFailure() << "contents differ";
  }
  return ::testing::AssertionSuccess();
}

double At(const Tensor& t, int64_t i) {
  return t.dtype() == DType::kFloat64 ? t.data_as<double>()[i]
                                      : t.data_as<float>()[i];
}

Tensor FloatTensor(DType dtype, const Shape& shape,
                   const std::vector<double>& values) {
  Tensor t(dtype, shape);
  EXPECT_EQ(static_cast<int64_t>(values.size()), t.num_elements());
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == DType::kFloat64) {
      t.data_as<double>()[i] = values[i];
    } else {
      t.data_as<float>()[i] = static_cast<float>(values[i]);
    }
  }
  return t;
}

// ---------------------------------------------------------------------------
// Signatures

TEST(StateSignatures, DeclareTheirStateSlots) {
  auto acc = Registry().Find("accumulate");
  ASSERT_TRUE(acc.ok()) << acc.status();
  const v1::FunctionSignature& a = (*acc)->signature;
  EXPECT_EQ(a.arity(), 1);
  EXPECT_EQ(a.num_outputs(), 1);
  EXPECT_EQ(a.dtypes_size(), 4);
  EXPECT_TRUE(a.collective().empty());
  ASSERT_EQ(a.states_size(), 1);
  EXPECT_EQ(a.states(0).name(), "buffer");
  EXPECT_TRUE(a.states(0).write());

  auto sgd = Registry().Find("linear_sgd_step");
  ASSERT_TRUE(sgd.ok()) << sgd.status();
  const v1::FunctionSignature& s = (*sgd)->signature;
  EXPECT_EQ(s.arity(), 2);
  EXPECT_EQ(s.num_outputs(), 1);
  EXPECT_EQ(s.collective(), "axes");
  ASSERT_EQ(s.states_size(), 1);
  EXPECT_EQ(s.states(0).name(), "params");
  EXPECT_TRUE(s.states(0).write());

  // axes defaults to "data"; lr is required.
  auto resolved =
      CheckCall(s, {DType::kFloat32, DType::kFloat32}, json{{"lr", 0.5}});
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_EQ((*resolved)["axes"], json("data"));
  EXPECT_EQ((*resolved)["lr"], json(0.5));
  EXPECT_TRUE(StatusIs(
      CheckCall(s, {DType::kFloat32, DType::kFloat32}, json::object()).status(),
      absl::StatusCode::kInvalidArgument, {"lr"}));
  EXPECT_TRUE(StatusIs(
      CheckCall(s, {DType::kInt32, DType::kInt32}, json{{"lr", 0.5}}).status(),
      absl::StatusCode::kInvalidArgument, {"int32"}));
}

// ---------------------------------------------------------------------------
// accumulate

class AccumulateTest : public ::testing::TestWithParam<DType> {};

TEST_P(AccumulateTest, BufferIsTheSumOfTheInputs) {
  const DType dtype = GetParam();
  const Shape shape = {3, 5};
  const int kCalls = 6;
  States states;
  states["buffer"] = Input(dtype, shape, /*seed=*/1);
  Tensor want = states["buffer"].Clone();
  CallContext ctx;
  ctx.states = &states;
  for (int k = 0; k < kCalls; ++k) {
    Tensor x = Input(dtype, shape, /*seed=*/100 + k);
    // Reference: a plain loop; integers wrap around.
    VisitDType(dtype, [&](auto zero) {
      using T = decltype(zero);
      T* w = want.data_as<T>();
      const T* xp = x.data_as<T>();
      for (int64_t i = 0; i < want.num_elements(); ++i) {
        if constexpr (std::is_integral_v<T>) {
          using U = std::make_unsigned_t<T>;
          w[i] = static_cast<T>(static_cast<U>(w[i]) + static_cast<U>(xp[i]));
        } else {
          w[i] = w[i] + xp[i];
        }
      }
    });
    std::vector<Tensor> args;
    args.push_back(std::move(x));
    auto out = Call("accumulate", ctx, std::move(args));
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_EQ(out->size(), 1u);
    EXPECT_TRUE(SameBytes((*out)[0], want)) << "call " << k;
    EXPECT_TRUE(SameBytes(states["buffer"], want)) << "call " << k;
  }
  ASSERT_EQ(states.size(), 1u);
}

INSTANTIATE_TEST_SUITE_P(AllDTypes, AccumulateTest,
                         ::testing::Values(DType::kFloat32, DType::kFloat64,
                                           DType::kInt32, DType::kInt64),
                         [](const auto& info) {
                           return DTypeName(info.param);
                         });

TEST(Accumulate, ShapeMismatchNamesBothShapesAndLeavesTheBuffer) {
  States states;
  states["buffer"] = Input(DType::kFloat32, {3, 5}, 1);
  const Tensor before = states["buffer"].Clone();
  CallContext ctx;
  ctx.states = &states;
  std::vector<Tensor> args;
  args.push_back(Input(DType::kFloat32, {5, 3}, 2));
  EXPECT_TRUE(StatusIs(Call("accumulate", ctx, std::move(args)).status(),
                       absl::StatusCode::kInvalidArgument,
                       {"accumulate", "(5, 3)", "(3, 5)", "buffer"}));
  EXPECT_TRUE(SameBytes(states["buffer"], before));

  // No broadcasting either.
  args.clear();
  args.push_back(Input(DType::kFloat32, {5}, 3));
  EXPECT_TRUE(StatusIs(Call("accumulate", ctx, std::move(args)).status(),
                       absl::StatusCode::kInvalidArgument, {"(5,)", "(3, 5)"}));
  EXPECT_TRUE(SameBytes(states["buffer"], before));
}

TEST(Accumulate, DTypeMismatchNamesBothDTypes) {
  States states;
  states["buffer"] = Tensor(DType::kFloat64, {4});
  CallContext ctx;
  ctx.states = &states;
  std::vector<Tensor> args;
  args.push_back(Tensor(DType::kFloat32, {4}));
  EXPECT_TRUE(StatusIs(Call("accumulate", ctx, std::move(args)).status(),
                       absl::StatusCode::kInvalidArgument,
                       {"float32", "float64"}));
}

TEST(Accumulate, MissingStateIsFailedPrecondition) {
  const std::initializer_list<absl::string_view> kMessage = {
      "accumulate needs its state 'buffer' bound to a resident array "
      "(--state buffer=NAME)"};
  CallContext no_states;
  std::vector<Tensor> args;
  args.push_back(Tensor(DType::kFloat32, {2}));
  EXPECT_TRUE(StatusIs(Call("accumulate", no_states, std::move(args)).status(),
                       absl::StatusCode::kFailedPrecondition, kMessage));

  States other;
  other["params"] = Tensor(DType::kFloat32, {2});
  CallContext wrong_slot;
  wrong_slot.states = &other;
  args.clear();
  args.push_back(Tensor(DType::kFloat32, {2}));
  EXPECT_TRUE(StatusIs(Call("accumulate", wrong_slot, std::move(args)).status(),
                       absl::StatusCode::kFailedPrecondition, kMessage));
}

// ---------------------------------------------------------------------------
// linear_sgd_step

constexpr int64_t kD = 3;
const double kWTrue[kD] = {1.5, -2.0, 0.5};
constexpr double kBTrue = 0.3;

// y = x @ w_true + b_true + noise in [-0.01, 0.01), in float64.
struct Dataset {
  int64_t n = 0;
  std::vector<double> x;  // [n, kD], row-major
  std::vector<double> y;  // [n]
};

Dataset MakeDataset(int64_t n, uint64_t seed) {
  Dataset ds;
  ds.n = n;
  ds.x.resize(n * kD);
  ds.y.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    double y = kBTrue;
    for (int64_t j = 0; j < kD; ++j) {
      ds.x[i * kD + j] = Uniform(seed, i * kD + j);
      y += ds.x[i * kD + j] * kWTrue[j];
    }
    ds.y[i] = y + 0.01 * Uniform(seed + 1, i);
  }
  return ds;
}

// The data as the kernel sees it: rounded to `dtype` (so the references
// use exactly the values the kernel gets).
Dataset Rounded(const Dataset& ds, DType dtype) {
  Dataset r = ds;
  if (dtype == DType::kFloat32) {
    for (double& v : r.x) v = static_cast<float>(v);
    for (double& v : r.y) v = static_cast<float>(v);
  }
  return r;
}

// Reference: one full-batch gradient step in one process, from the
// definition. Returns the loss at `params`; updates `params`.
double ReferenceStep(const Dataset& ds, std::vector<double>& params,
                     double lr) {
  double loss = 0;
  std::vector<double> grad(kD + 1, 0.0);
  for (int64_t i = 0; i < ds.n; ++i) {
    double pred = params[kD];
    for (int64_t j = 0; j < kD; ++j) pred += ds.x[i * kD + j] * params[j];
    const double r = pred - ds.y[i];
    loss += r * r;
    for (int64_t j = 0; j < kD; ++j) grad[j] += 2 * ds.x[i * kD + j] * r;
    grad[kD] += 2 * r;
  }
  for (int64_t j = 0; j <= kD; ++j) params[j] -= lr * grad[j] / ds.n;
  return loss / ds.n;
}

// Reference: argmin ||[x, 1] p - y||^2 by the normal equations
// (A^T A) p = A^T y, solved by Gaussian elimination with partial pivoting.
std::vector<double> LeastSquares(const Dataset& ds) {
  constexpr int64_t m = kD + 1;
  double a[m][m + 1] = {};
  for (int64_t i = 0; i < ds.n; ++i) {
    double row[m];
    for (int64_t j = 0; j < kD; ++j) row[j] = ds.x[i * kD + j];
    row[kD] = 1.0;
    for (int64_t r = 0; r < m; ++r) {
      for (int64_t c = 0; c < m; ++c) a[r][c] += row[r] * row[c];
      a[r][m] += row[r] * ds.y[i];
    }
  }
  for (int64_t col = 0; col < m; ++col) {
    int64_t pivot = col;
    for (int64_t r = col + 1; r < m; ++r) {
      if (std::fabs(a[r][col]) > std::fabs(a[pivot][col])) pivot = r;
    }
    for (int64_t c = 0; c <= m; ++c) std::swap(a[col][c], a[pivot][c]);
    for (int64_t r = col + 1; r < m; ++r) {
      const double f = a[r][col] / a[col][col];
      for (int64_t c = col; c <= m; ++c) a[r][c] -= f * a[col][c];
    }
  }
  std::vector<double> p(m);
  for (int64_t r = m - 1; r >= 0; --r) {
    double s = a[r][m];
    for (int64_t c = r + 1; c < m; ++c) s -= a[r][c] * p[c];
    p[r] = s / a[r][r];
  }
  return p;
}

struct SgdRun {
  // [device][step]
  std::vector<std::vector<absl::StatusOr<std::vector<Tensor>>>> outputs;
  std::vector<States> states;  // [device], after the last step
  size_t pending = 0;
};

// Runs `steps` calls of linear_sgd_step on a mesh data=<rows.size()>, one
// thread per device; device k gets the next rows[k] rows of `ds`, and every
// device starts from `params`.
SgdRun RunSgd(const Dataset& ds, DType dtype, const std::vector<int64_t>& rows,
              const std::vector<double>& params, int steps,
              const std::string& kwargs) {
  const int64_t n_dev = static_cast<int64_t>(rows.size());
  absl::StatusOr<Mesh> mesh = Mesh::Parse("data=" + std::to_string(n_dev));
  EXPECT_TRUE(mesh.ok()) << mesh.status();
  InMemoryHub hub(n_dev, absl::Seconds(10));
  SgdRun run;
  run.outputs.resize(n_dev);
  run.states.resize(n_dev);
  std::vector<int64_t> first(n_dev, 0);
  for (int64_t k = 1; k < n_dev; ++k) first[k] = first[k - 1] + rows[k - 1];
  EXPECT_EQ(first[n_dev - 1] + rows[n_dev - 1], ds.n);

  std::vector<std::thread> threads;
  for (int64_t dev = 0; dev < n_dev; ++dev) {
    threads.emplace_back([&, dev] {
      std::unique_ptr<InMemoryPeerTransport> endpoint = hub.Endpoint(dev);
      Communicator comm(&*mesh, dev, endpoint.get(), {});
      const std::vector<double> xv(
          ds.x.begin() + first[dev] * kD,
          ds.x.begin() + (first[dev] + rows[dev]) * kD);
      const std::vector<double> yv(ds.y.begin() + first[dev],
                                   ds.y.begin() + first[dev] + rows[dev]);
      const Tensor x = FloatTensor(dtype, {rows[dev], kD}, xv);
      const Tensor y = FloatTensor(dtype, {rows[dev]}, yv);
      States& states = run.states[dev];
      states["params"] = FloatTensor(dtype, {kD + 1}, params);
      CallContext ctx;
      ctx.mesh = &*mesh;
      ctx.device_id = dev;
      ctx.coords = mesh->Coords(dev);
      ctx.comm = &comm;
      ctx.states = &states;
      for (int s = 0; s < steps; ++s) {
        std::vector<Tensor> args;
        args.push_back(x.Clone());
        args.push_back(y.Clone());
        auto out = Call("linear_sgd_step", ctx, std::move(args), kwargs);
        if (!out.ok()) hub.Abort(out.status());
        run.outputs[dev].push_back(std::move(out));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  run.pending = hub.PendingMessages();
  return run;
}

// Every device's outputs and params are bitwise identical to device 0's.
void ExpectReplicated(const SgdRun& run) {
  for (size_t dev = 1; dev < run.outputs.size(); ++dev) {
    EXPECT_TRUE(
        SameBytes(run.states[dev].at("params"), run.states[0].at("params")))
        << "device " << dev;
    for (size_t s = 0; s < run.outputs[dev].size(); ++s) {
      ASSERT_TRUE(run.outputs[dev][s].ok());
      EXPECT_TRUE(SameBytes((*run.outputs[dev][s])[0], (*run.outputs[0][s])[0]))
          << "device " << dev << " step " << s;
    }
  }
}

void ExpectNearRel(double got, double want, double rtol, const char* what) {
  EXPECT_LE(std::fabs(got - want), 1e-12 + rtol * std::fabs(want))
      << what << ": got " << got << ", want " << want;
}

struct StepCase {
  DType dtype;
  std::vector<int64_t> rows;  // per device
};

class SgdOneStepTest : public ::testing::TestWithParam<StepCase> {};

TEST_P(SgdOneStepTest, MatchesTheSingleProcessGradientStep) {
  const StepCase& c = GetParam();
  int64_t n = 0;
  for (int64_t r : c.rows) n += r;
  const Dataset ds = Rounded(MakeDataset(n, /*seed=*/7), c.dtype);
  const std::vector<double> start = {0.25, -0.5, 0.125, 0.75};
  const double lr = 0.1;

  SgdRun run = RunSgd(ds, c.dtype, c.rows, start, /*steps=*/1,
                      R"({"lr": 0.1, "axes": "data"})");
  for (size_t dev = 0; dev < c.rows.size(); ++dev) {
    ASSERT_TRUE(run.outputs[dev][0].ok())
        << "device " << dev << ": " << run.outputs[dev][0].status();
  }
  EXPECT_EQ(run.pending, 0u);
  ExpectReplicated(run);

  std::vector<double> want = start;
  // The kernel starts from params rounded to its dtype.
  if (c.dtype == DType::kFloat32) {
    for (double& v : want) v = static_cast<float>(v);
  }
  const double want_loss = ReferenceStep(ds, want, lr);
  const Tensor& loss = (*run.outputs[0][0])[0];
  EXPECT_EQ(loss.dtype(), c.dtype);
  EXPECT_EQ(loss.shape(), Shape({1}));
  ExpectNearRel(At(loss, 0), want_loss, 1e-6, "loss");
  const Tensor& params = run.states[0].at("params");
  EXPECT_EQ(params.dtype(), c.dtype);
  EXPECT_EQ(params.shape(), Shape({kD + 1}));
  for (int64_t j = 0; j <= kD; ++j) {
    ExpectNearRel(At(params, j), want[j], 1e-6, "params");
  }
}

INSTANTIATE_TEST_SUITE_P(
    Splits, SgdOneStepTest,
    ::testing::Values(StepCase{DType::kFloat64, {16, 16, 16, 16}},
                      StepCase{DType::kFloat32, {16, 16, 16, 16}},
                      // N is the global batch: uneven blocks, even empty.
                      StepCase{DType::kFloat64, {10, 6, 0, 32}},
                      StepCase{DType::kFloat32, {1, 0, 20, 3}},
                      StepCase{DType::kFloat64, {64}}),
    [](const auto& info) {
      std::string name = DTypeName(info.param.dtype);
      for (int64_t r : info.param.rows) name += "_" + std::to_string(r);
      return name;
    });

class SgdTrainingTest : public ::testing::TestWithParam<DType> {};

TEST_P(SgdTrainingTest, ConvergesToTheLeastSquaresSolution) {
  const DType dtype = GetParam();
  const int kSteps = 200;
  const Dataset ds = Rounded(MakeDataset(128, /*seed=*/11), dtype);
  SgdRun run = RunSgd(ds, dtype, {32, 32, 32, 32}, {0, 0, 0, 0}, kSteps,
                      R"({"lr": 0.1})");
  for (size_t dev = 0; dev < run.outputs.size(); ++dev) {
    for (int s = 0; s < kSteps; ++s) {
      ASSERT_TRUE(run.outputs[dev][s].ok())
          << "device " << dev << " step " << s << ": "
          << run.outputs[dev][s].status();
    }
  }
  EXPECT_EQ(run.pending, 0u);
  ExpectReplicated(run);

  // Gradient descent on a convex quadratic with a small step: the loss
  // never goes up, and falls by orders of magnitude.
  std::vector<double> losses;
  for (int s = 0; s < kSteps; ++s) {
    losses.push_back(At((*run.outputs[0][s])[0], 0));
  }
  for (int s = 1; s < kSteps; ++s) {
    EXPECT_LE(losses[s], losses[s - 1] * (1 + 1e-6)) << "step " << s;
  }
  EXPECT_LT(losses.back(), losses.front() * 1e-3);

  const std::vector<double> best = LeastSquares(ds);
  const double tol = dtype == DType::kFloat64 ? 1e-4 : 1e-3;
  const Tensor& params = run.states[0].at("params");
  for (int64_t j = 0; j <= kD; ++j) {
    EXPECT_NEAR(At(params, j), best[j], tol) << "params[" << j << "]";
    EXPECT_NEAR(best[j], j < kD ? kWTrue[j] : kBTrue, 0.01);
  }
}

INSTANTIATE_TEST_SUITE_P(FloatDTypes, SgdTrainingTest,
                         ::testing::Values(DType::kFloat32, DType::kFloat64),
                         [](const auto& info) {
                           return DTypeName(info.param);
                         });

// One device (mesh data=1) running one call, for the error cases.
absl::Status OneDeviceCall(std::vector<Tensor> args, States* states,
                           const std::string& kwargs, bool with_comm = true) {
  absl::StatusOr<Mesh> mesh = Mesh::Parse("data=1");
  EXPECT_TRUE(mesh.ok());
  InMemoryHub hub(1, absl::Seconds(5));
  std::unique_ptr<InMemoryPeerTransport> endpoint = hub.Endpoint(0);
  Communicator comm(&*mesh, 0, endpoint.get(), {});
  CallContext ctx;
  ctx.mesh = &*mesh;
  ctx.coords = {0};
  ctx.comm = with_comm ? &comm : nullptr;
  ctx.states = states;
  return Call("linear_sgd_step", ctx, std::move(args), kwargs).status();
}

std::vector<Tensor> Args(DType dtype, const Shape& x, const Shape& y) {
  std::vector<Tensor> args;
  args.push_back(Tensor(dtype, x));
  args.push_back(Tensor(dtype, y));
  return args;
}

TEST(LinearSgdStep, ShapeErrorsNameTheDimension) {
  States states;
  states["params"] = Tensor(DType::kFloat32, {4});
  const Tensor before = states["params"].Clone();
  const std::string kw = R"({"lr": 0.1})";
  EXPECT_TRUE(
      StatusIs(OneDeviceCall(Args(DType::kFloat32, {5, 3}, {4}), &states, kw),
               absl::StatusCode::kInvalidArgument,
               {"dimension 0 of y (size 4)", "dimension 0 of x (size 5)"}));
  EXPECT_TRUE(
      StatusIs(OneDeviceCall(Args(DType::kFloat32, {5, 2}, {5}), &states, kw),
               absl::StatusCode::kInvalidArgument,
               {"'params'", "(3,)", "dimension 1 of x (size 2)", "(4,)"}));
  EXPECT_TRUE(
      StatusIs(OneDeviceCall(Args(DType::kFloat32, {5}, {5}), &states, kw),
               absl::StatusCode::kInvalidArgument, {"x must have rank 2"}));
  EXPECT_TRUE(StatusIs(
      OneDeviceCall(Args(DType::kFloat32, {5, 3}, {5, 1}), &states, kw),
      absl::StatusCode::kInvalidArgument, {"y must have rank 1"}));
  EXPECT_TRUE(SameBytes(states["params"], before));

  States f64;
  f64["params"] = Tensor(DType::kFloat64, {4});
  EXPECT_TRUE(
      StatusIs(OneDeviceCall(Args(DType::kFloat32, {5, 3}, {5}), &f64, kw),
               absl::StatusCode::kInvalidArgument, {"float32", "float64"}));
}

TEST(LinearSgdStep, NeedsItsStateAndACommunicator) {
  const std::string kw = R"({"lr": 0.1})";
  EXPECT_TRUE(StatusIs(
      OneDeviceCall(Args(DType::kFloat32, {5, 3}, {5}), nullptr, kw),
      absl::StatusCode::kFailedPrecondition,
      {"linear_sgd_step needs its state 'params' bound to a resident array "
       "(--state params=NAME)"}));
  States states;
  states["params"] = Tensor(DType::kFloat32, {4});
  EXPECT_TRUE(StatusIs(OneDeviceCall(Args(DType::kFloat32, {5, 3}, {5}),
                                     &states, kw, /*with_comm=*/false),
                       absl::StatusCode::kFailedPrecondition,
                       {"communicator"}));
}

TEST(LinearSgdStep, EmptyGlobalBatchAndUnknownAxisFail) {
  States states;
  states["params"] = Tensor(DType::kFloat64, {4});
  EXPECT_TRUE(StatusIs(OneDeviceCall(Args(DType::kFloat64, {0, 3}, {0}),
                                     &states, R"({"lr": 0.1})"),
                       absl::StatusCode::kInvalidArgument,
                       {"global batch is empty"}));
  EXPECT_TRUE(
      StatusIs(OneDeviceCall(Args(DType::kFloat64, {2, 3}, {2}), &states,
                             R"({"lr": 0.1, "axes": "model"})"),
               absl::StatusCode::kInvalidArgument, {"model"}));
  EXPECT_TRUE(StatusIs(OneDeviceCall(Args(DType::kFloat64, {2, 3}, {2}),
                                     &states, R"({"lr": "fast"})"),
                       absl::StatusCode::kInvalidArgument, {"lr"}));
}

}  // namespace
}  // namespace shardmap
