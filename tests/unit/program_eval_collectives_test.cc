// program::Evaluate's collectives: N evaluations in threads, each with a
// fake Collectives over one in-memory hub (one mesh axis 'i'), checked
// against the same computation done in one process with plain loops.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "program/collectives.h"
#include "program/evaluator.h"
#include "tests/unit/program_builder.h"
#include "tests/unit/program_numpy.h"

namespace shardmap {
namespace program {
namespace {

constexpr ElemType kF32 = ElemType::kFloat32;

// Every rank posts one tensor per round and gets everyone's back.
class Hub {
 public:
  explicit Hub(int n) : n_(n), round_of_(n, 0) {}

  absl::StatusOr<std::vector<Tensor>> Exchange(int rank, const Tensor& x) {
    absl::MutexLock lock(&mu_);
    const int64_t round = round_of_[rank]++;
    Round& r = rounds_[round];
    r.posts.resize(n_);
    r.posts[rank] = x.Clone();
    ++r.posted;
    if (!mu_.AwaitWithTimeout(
            absl::Condition(
                +[](Round* r) { return r->posted == r->posts.size(); }, &r),
            absl::Seconds(60))) {
      return absl::DeadlineExceededError("hub: a rank never posted");
    }
    std::vector<Tensor> all;
    for (const Tensor& t : r.posts) all.push_back(t.Clone());
    if (++r.taken == n_) rounds_.erase(round);
    return all;
  }

 private:
  struct Round {
    std::vector<Tensor> posts;
    size_t posted = 0;
    int taken = 0;
  };
  const int n_;
  absl::Mutex mu_;
  std::vector<int64_t> round_of_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, Round> rounds_ ABSL_GUARDED_BY(mu_);
};

// float32 collectives over axis 'i' of size n with plain loops.
class FakeCollectives : public Collectives {
 public:
  FakeCollectives(Hub& hub, int rank, int n) : hub_(hub), rank_(rank), n_(n) {}

  absl::StatusOr<Tensor> Psum(const Tensor& x, const MeshAxes&) override {
    return Fold(x, [](float a, float b) { return a + b; });
  }
  absl::StatusOr<Tensor> Pmean(const Tensor& x, const MeshAxes& a) override {
    absl::StatusOr<Tensor> s = Psum(x, a);
    if (s.ok()) {
      for (int64_t i = 0; i < s->num_elements(); ++i)
        s->data_as<float>()[i] /= n_;
    }
    return s;
  }
  absl::StatusOr<Tensor> Pmax(const Tensor& x, const MeshAxes&) override {
    return Fold(x, [](float a, float b) { return std::max(a, b); });
  }
  absl::StatusOr<Tensor> Pmin(const Tensor& x, const MeshAxes&) override {
    return Fold(x, [](float a, float b) { return std::min(a, b); });
  }
  // Tiled or not, the bytes are rank-major blocks of x.shape[axis:].
  absl::StatusOr<Tensor> AllGather(const Tensor& x, const MeshAxes&,
                                   int64_t axis, bool tiled) override {
    absl::StatusOr<std::vector<Tensor>> all = hub_.Exchange(rank_, x);
    if (!all.ok()) return all.status();
    Shape shape = x.shape();
    if (tiled) {
      shape[axis] *= n_;
    } else {
      shape.insert(shape.begin() + axis, n_);
    }
    Tensor out(shardmap::DType::kFloat32, shape);
    int64_t outer = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= x.shape()[d];
    const int64_t inner = outer == 0 ? 0 : x.num_elements() / outer;
    float* o = out.data_as<float>();
    for (int64_t p = 0; p < outer; ++p) {
      for (int r = 0; r < n_; ++r) {
        std::copy_n((*all)[r].data_as<float>() + p * inner, inner, o);
        o += inner;
      }
    }
    return out;
  }
  absl::StatusOr<Tensor> PsumScatter(const Tensor& x, const MeshAxes& a,
                                     int64_t dim, bool tiled) override {
    absl::StatusOr<Tensor> sum = Psum(x, a);
    if (!sum.ok() || !tiled)
      return absl::UnimplementedError("fake: tiled only");
    Shape shape = x.shape();
    shape[dim] /= n_;
    Tensor out(shardmap::DType::kFloat32, shape);
    int64_t outer = 1;
    for (int64_t d = 0; d < dim; ++d) outer *= x.shape()[d];
    const int64_t chunk = out.num_elements() / outer;
    for (int64_t p = 0; p < outer; ++p) {
      std::copy_n(sum->data_as<float>() + (p * n_ + rank_) * chunk, chunk,
                  out.data_as<float>() + p * chunk);
    }
    return out;
  }
  absl::StatusOr<Tensor> Ppermute(
      const Tensor& x, const MeshAxes&,
      const std::vector<std::pair<int64_t, int64_t>>& perm) override {
    absl::StatusOr<std::vector<Tensor>> all = hub_.Exchange(rank_, x);
    if (!all.ok()) return all.status();
    for (auto [src, dst] : perm) {
      if (dst == rank_) return std::move((*all)[src]);
    }
    return Tensor(shardmap::DType::kFloat32, x.shape());
  }
  absl::StatusOr<Tensor> AllToAll(const Tensor&, const MeshAxes&, int64_t,
                                  int64_t, bool) override {
    return absl::UnimplementedError("fake: no all_to_all");
  }
  absl::StatusOr<int64_t> AxisIndex(const MeshAxes&) override { return rank_; }

 private:
  template <typename F>
  absl::StatusOr<Tensor> Fold(const Tensor& x, F f) {
    absl::StatusOr<std::vector<Tensor>> all = hub_.Exchange(rank_, x);
    if (!all.ok()) return all.status();
    Tensor out = (*all)[0].Clone();
    for (int r = 1; r < n_; ++r) {
      for (int64_t i = 0; i < out.num_elements(); ++i) {
        out.data_as<float>()[i] =
            f(out.data_as<float>()[i], (*all)[r].data_as<float>()[i]);
      }
    }
    return out;
  }

  Hub& hub_;
  const int rank_, n_;
};

TEST(ProgramEvalCollectives, EveryCollectiveOverFourThreadsEqualsOneProcess) {
  constexpr int kN = 4;
  ProgramBuilder b;
  const int x = b.Param(kF32, {4, 3});
  const int w = b.Param(kF32, {3, 8});
  Attrs on_i;
  on_i.mesh_axes = {"i"};
  auto coll = [&](OpCode op, std::vector<int> xs, Shape shape, Attrs a) {
    a.mesh_axes = {"i"};
    return b.Collective(op, std::move(xs), {kF32, std::move(shape), {}}, a);
  };
  const int h = b.Unary(OpCode::kRelu, b.MatMul(x, w));
  b.Output(coll(OpCode::kPsum, {h}, {4, 8}, {}));
  Attrs gather;
  gather.axis = 0;
  gather.tiled = true;
  b.Output(coll(OpCode::kAllGather, {x}, {16, 3}, gather));
  gather.axis = 1;
  gather.tiled = false;
  b.Output(coll(OpCode::kAllGather, {x}, {4, 4, 3}, gather));
  Attrs scatter;
  scatter.axis = 1;
  scatter.tiled = true;
  b.Output(coll(OpCode::kPsumScatter, {b.MatMul(x, w)}, {4, 2}, scatter));
  Attrs shift;
  for (int j = 0; j < kN; ++j) shift.perm_pairs.push_back({j, (j + 1) % kN});
  const int index =
      b.Collective(OpCode::kAxisIndex, {}, {ElemType::kInt32, {}, {}}, on_i);
  b.Output(b.Binary(OpCode::kAdd, coll(OpCode::kPpermute, {x}, {4, 3}, shift),
                    b.Convert(index, kF32)));
  b.Output(coll(OpCode::kPmax, {x}, {4, 3}, {}));
  b.Output(
      coll(OpCode::kPmean, {coll(OpCode::kPmin, {x}, {4, 3}, {})}, {4, 3}, {}));
  const Program program = b.Build();

  std::mt19937 rng(21);
  std::vector<Tensor> xs;
  for (int r = 0; r < kN; ++r)
    xs.push_back(RandomTensor(shardmap::DType::kFloat32, {4, 3}, rng));
  const Tensor wt = RandomTensor(shardmap::DType::kFloat32, {3, 8}, rng);

  Hub hub(kN);
  std::vector<absl::StatusOr<std::vector<Tensor>>> results(kN);
  std::vector<std::thread> threads;
  for (int r = 0; r < kN; ++r) {
    threads.emplace_back([&, r] {
      FakeCollectives c(hub, r, kN);
      std::vector<Tensor> args;
      args.push_back(xs[r].Clone());
      args.push_back(wt.Clone());
      results[r] = Evaluate(program, std::move(args), &c);
    });
  }
  for (std::thread& t : threads) t.join();

  // The same in one process.
  auto X = [&](int r, int i, int j) {
    return xs[r].data_as<float>()[i * 3 + j];
  };
  auto XW = [&](int r, int i, int j) {
    float s = 0;
    for (int k = 0; k < 3; ++k)
      s += X(r, i, k) * wt.data_as<float>()[k * 8 + j];
    return s;
  };
  for (int r = 0; r < kN; ++r) {
    ASSERT_TRUE(results[r].ok()) << results[r].status();
    const std::vector<Tensor>& out = *results[r];
    ASSERT_EQ(out.size(), 7u);
    auto at = [&](int k, int64_t i) { return out[k].data_as<float>()[i]; };
    for (int i = 0; i < 4; ++i) {
      for (int j = 0; j < 8; ++j) {
        float psum = 0, scatter = 0;
        for (int q = 0; q < kN; ++q) psum += std::max(XW(q, i, j), 0.0f);
        EXPECT_NEAR(at(0, i * 8 + j), psum, 1e-4);
        if (j < 2) {
          for (int q = 0; q < kN; ++q) scatter += XW(q, i, r * 2 + j);
          EXPECT_NEAR(at(3, i * 2 + j), scatter, 1e-4);
        }
      }
      for (int j = 0; j < 3; ++j) {
        float mx = X(0, i, j), mn = X(0, i, j);
        for (int q = 0; q < kN; ++q) {
          mx = std::max(mx, X(q, i, j));
          mn = std::min(mn, X(q, i, j));
          EXPECT_EQ(at(1, (q * 4 + i) * 3 + j), X(q, i, j));   // tiled gather
          EXPECT_EQ(at(2, (i * kN + q) * 3 + j), X(q, i, j));  // stacked at 1
        }
        EXPECT_EQ(at(4, i * 3 + j), X((r + kN - 1) % kN, i, j) + r);
        EXPECT_EQ(at(5, i * 3 + j), mx);
        EXPECT_NEAR(at(6, i * 3 + j), mn, 1e-6);
      }
    }
  }
}

// A collective whose result does not have the instruction's type is an
// INTERNAL error naming the instruction, not a crash later.
TEST(ProgramEvalCollectives, AResultOfTheWrongShapeIsRefused) {
  ProgramBuilder b;
  const int x = b.Param(kF32, {4, 3});
  Attrs a;
  a.mesh_axes = {"i"};
  a.axis = 0;
  a.tiled = true;
  // Claims all_gather over 2 devices; the hub has 1.
  const Program p =
      b.Build(b.Collective(OpCode::kAllGather, {x}, {kF32, {8, 3}, {}}, a));
  Hub hub(1);
  FakeCollectives c(hub, 0, 1);
  std::vector<Tensor> args;
  args.emplace_back(shardmap::DType::kFloat32, Shape{4, 3});
  absl::StatusOr<std::vector<Tensor>> out = Evaluate(p, std::move(args), &c);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(out.status().message().find("instruction 1 (all_gather"),
            std::string::npos)
      << out.status();
}

}  // namespace
}  // namespace program
}  // namespace shardmap
