// Tests of the SDK's worker side (worker/functions/sdk_context.h,
// sdk_function.h): kernels written against include/shardmap/ run through
// the worker's ShardExecutor; outputs that are views of worker tensors
// move out without a copy, others are copied; errors carry the function's
// name; scratch memory is reserved; collectives reach the communicator
// (4 devices as threads over an InMemoryHub), checked against plain loops.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "shardmap/sdk.h"
#include "tests/fakes/in_memory_peer_transport.h"
#include "tests/unit/status_matchers.h"
#include "worker/collectives/communicator.h"
#include "worker/functions/sdk_function.h"
#include "worker/shard_executor.h"

namespace shardmap {
namespace {

using sdk::Context;
using sdk::TensorView;
using Result = absl::StatusOr<std::vector<TensorView>>;

const void* g_seen = nullptr;  // a data pointer a kernel saw
double g_foreign[2] = {4.0, 5.0};

Tensor Doubles(std::vector<double> v) {
  Tensor t(DType::kFloat64, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.data_as<double>()[i] = v[i];
  return t;
}

std::vector<double> Values(const Tensor& t) {
  return std::vector<double>(t.data_as<double>(),
                             t.data_as<double>() + t.num_elements());
}

FunctionRegistry& Registry() {
  static FunctionRegistry* r = [] {
    auto* reg = new FunctionRegistry;
    auto add = [reg](sdk::Function f) {
      absl::Status s = reg->Register(std::move(f), "plugin test");
      if (!s.ok()) ADD_FAILURE() << s;
    };
    add(sdk::Function("pass", 1).Kernel([](Context&, const auto& a) -> Result {
      g_seen = a[0].data();
      return a;
    }));
    add(sdk::Function("fresh", 1)
            .Kernel([](Context& ctx, const auto& a) -> Result {
              auto y = ctx.Allocate(sdk::DType::kFloat64, {2});
              if (!y.ok()) return y.status();
              y->data_as<double>()[1] = 7;
              g_seen = y->data();
              return std::vector<TensorView>{*y};
            }));
    // An output it writes entirely: [1, 2, 3] in uninitialized memory.
    add(sdk::Function("raw", 1).Kernel(
        [](Context& ctx, const auto& a) -> Result {
          auto y = ctx.AllocateUninitialized(sdk::DType::kFloat64, {3});
          if (!y.ok()) return y.status();
          for (int i = 0; i < 3; ++i) y->data_as<double>()[i] = i + 1;
          g_seen = y->data();
          return std::vector<TensorView>{*y};
        }));
    add(sdk::Function("foreign", 1).Kernel([](Context&, const auto&) -> Result {
      return std::vector<TensorView>{
          TensorView(sdk::DType::kFloat64, {2}, g_foreign)};
    }));
    add(sdk::Function("fails", 1).Kernel([](Context&, const auto&) -> Result {
      return absl::InvalidArgumentError("x is too small");
    }));
    add(sdk::Function("bump", 1)
            .State("count", true)
            .Kernel([](Context& ctx, const auto&) -> Result {
              auto s = ctx.State("count");
              if (!s.ok()) return s.status();
              s->data_as<double>()[0] += 1;
              return std::vector<TensorView>{*s};
            }));
    add(sdk::Function("where", 1)
            .Kernel([](Context& ctx, const auto&) -> Result {
              auto y = ctx.Allocate(sdk::DType::kFloat64, {4});
              if (!y.ok()) return y.status();
              double* p = y->data_as<double>();
              p[0] = ctx.device_id();
              p[1] = ctx.coords().back();
              p[2] = ctx.axis_sizes().back();
              p[3] = ctx.axis_names().back() == "y" ? 1 : 0;
              return std::vector<TensorView>{*y};
            }));
    // psum, all_gather (tiled), ppermute (shift by one) and axis_index of
    // x over axis "x", as one output each.
    add(sdk::Function("collect", 1, 4)
            .Kernel([](Context& ctx, const auto& a) -> Result {
              const sdk::Axes axes = {"x"};
              auto sum = ctx.Psum(a[0], axes);
              if (!sum.ok()) return sum.status();
              auto all = ctx.AllGather(a[0], axes, 0, true);
              if (!all.ok()) return all.status();
              auto n = ctx.AxisSize(axes);
              if (!n.ok()) return n.status();
              std::vector<std::pair<int64_t, int64_t>> perm;
              for (int64_t i = 0; i < *n; ++i)
                perm.push_back({i, (i + 1) % *n});
              auto shifted = ctx.Ppermute(a[0], axes, perm);
              if (!shifted.ok()) return shifted.status();
              auto index = ctx.AxisIndex(axes);
              if (!index.ok()) return index.status();
              auto idx = ctx.Allocate(sdk::DType::kInt64, {});
              if (!idx.ok()) return idx.status();
              *idx->data_as<int64_t>() = *index;
              return std::vector<TensorView>{*sum, *all, *shifted, *idx};
            }));
    return reg;
  }();
  return *r;
}

absl::StatusOr<std::vector<Tensor>> Call(
    const std::string& fn, std::vector<Tensor> args,
    std::map<std::string, Tensor>* states = nullptr,
    std::function<absl::StatusOr<std::shared_ptr<void>>(uint64_t)> reserve =
        nullptr) {
  ShardCall call;
  call.function = fn;
  call.args = std::move(args);
  call.reserve = std::move(reserve);
  return ShardExecutor(&Registry()).Run(std::move(call), nullptr, states);
}

std::vector<Tensor> One(Tensor t) {
  std::vector<Tensor> v;
  v.push_back(std::move(t));
  return v;
}

TEST(SdkContextTest, ArgumentReturnedMovesOutWithoutCopy) {
  auto out = Call("pass", One(Doubles({1, 2})));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].data(), g_seen);
  EXPECT_EQ(Values((*out)[0]), (std::vector<double>{1, 2}));
}

TEST(SdkContextTest, AllocatedTensorMovesOutZeroFilled) {
  auto out = Call("fresh", One(Doubles({1})));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].data(), g_seen);
  EXPECT_EQ(Values((*out)[0]), (std::vector<double>{0, 7}));
}

TEST(SdkContextTest, UninitializedAllocationMovesOutAndIsReserved) {
  uint64_t asked = 0;
  auto grant =
      [&asked](uint64_t bytes) -> absl::StatusOr<std::shared_ptr<void>> {
    asked += bytes;
    return std::make_shared<int>(0);
  };
  auto out = Call("raw", One(Doubles({1})), nullptr, grant);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].data(), g_seen);
  EXPECT_EQ(Values((*out)[0]), (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(asked, 24u);
  auto refuse = [](uint64_t) -> absl::StatusOr<std::shared_ptr<void>> {
    return absl::ResourceExhaustedError("over the budget of 8 bytes");
  };
  EXPECT_TRUE(StatusIs(Call("raw", One(Doubles({1})), nullptr, refuse).status(),
                       absl::StatusCode::kResourceExhausted,
                       {"raw", "over the budget"}));
}

TEST(SdkContextTest, ForeignMemoryIsCopied) {
  auto out = Call("foreign", One(Doubles({1})));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_NE((*out)[0].data(), static_cast<void*>(g_foreign));
  EXPECT_EQ(Values((*out)[0]), (std::vector<double>{4, 5}));
}

TEST(SdkContextTest, ErrorsCarryTheFunctionName) {
  EXPECT_TRUE(StatusIs(Call("fails", One(Doubles({1}))).status(),
                       absl::StatusCode::kInvalidArgument,
                       {"fails: x is too small"}));
}

TEST(SdkContextTest, AllocateIsReservedAndRefusedOverBudget) {
  uint64_t asked = 0;
  auto refuse =
      [&asked](uint64_t bytes) -> absl::StatusOr<std::shared_ptr<void>> {
    asked += bytes;
    return absl::ResourceExhaustedError("over the budget of 8 bytes");
  };
  EXPECT_TRUE(StatusIs(
      Call("fresh", One(Doubles({1})), nullptr, refuse).status(),
      absl::StatusCode::kResourceExhausted, {"fresh", "over the budget"}));
  EXPECT_EQ(asked, 16u);
}

TEST(SdkContextTest, StateUpdatedInPlaceAndOutputIsACopy) {
  std::map<std::string, Tensor> states;
  states["count"] = Doubles({41});
  auto out = Call("bump", One(Doubles({0})), &states);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values(states["count"]), (std::vector<double>{42}));
  EXPECT_EQ(Values((*out)[0]), (std::vector<double>{42}));
  EXPECT_NE((*out)[0].data(), states["count"].data());
  EXPECT_TRUE(StatusIs(Call("bump", One(Doubles({0}))).status(),
                       absl::StatusCode::kFailedPrecondition,
                       {"bump", "state 'count'"}));
}

TEST(SdkContextTest, CollectivesWithoutPeersFail) {
  EXPECT_TRUE(StatusIs(Call("collect", One(Doubles({1}))).status(),
                       absl::StatusCode::kFailedPrecondition,
                       {"collect", "psum needs collectives"}));
}

TEST(SdkContextTest, MeshAndDevice) {
  ShardCall call;
  call.function = "where";
  call.mesh = *Mesh::Parse("x=2,y=3");
  call.device_id = 5;
  call.args = One(Doubles({1}));
  auto out = ShardExecutor(&Registry()).Run(std::move(call));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values((*out)[0]), (std::vector<double>{5, 2, 3, 1}));
}

TEST(SdkContextTest, CollectivesOnFourDevices) {
  const int64_t n = 4;
  const Mesh mesh = *Mesh::Parse("x=4");
  InMemoryHub hub(n, absl::Seconds(10));
  std::vector<absl::StatusOr<std::vector<Tensor>>> outs(n);
  std::vector<std::thread> threads;
  for (int64_t d = 0; d < n; ++d) {
    threads.emplace_back([&, d] {
      auto endpoint = hub.Endpoint(d);
      Communicator comm(&mesh, d, endpoint.get(), {});
      ShardCall call;
      call.function = "collect";
      call.mesh = mesh;
      call.device_id = d;
      call.args = One(Doubles({1.0 * d, 10.0 * d}));
      outs[d] = ShardExecutor(&Registry()).Run(std::move(call), &comm);
      if (!outs[d].ok()) hub.Abort(outs[d].status());
    });
  }
  for (auto& t : threads) t.join();
  for (int64_t d = 0; d < n; ++d) {
    ASSERT_TRUE(outs[d].ok()) << outs[d].status();
    const std::vector<Tensor>& o = *outs[d];
    EXPECT_EQ(Values(o[0]), (std::vector<double>{6, 60}));
    EXPECT_EQ(Values(o[1]), (std::vector<double>{0, 0, 1, 10, 2, 20, 3, 30}));
    const double from = (d + n - 1) % n;
    EXPECT_EQ(Values(o[2]), (std::vector<double>{from, 10 * from}));
    EXPECT_EQ(*o[3].data_as<int64_t>(), d);
  }
}

}  // namespace
}  // namespace shardmap
