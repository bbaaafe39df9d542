#include <Eigen/Core>
#include <cstdint>
#include <vector>

#include "core/status_util.h"
#include "program/eval_compute.h"
#include "program/eval_layout.h"
#include "program/eval_scalar.h"

namespace shardmap {
namespace program {
namespace {

template <typename T>
using RowMajor =
    Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// One (m, k) @ (k, n) product over C-order buffers, which are row-major
// matrices: no copies. A transposed operand is stored as (k, m) or (n, k).
template <typename U>
void Gemm(const U* a, const U* b, U* c, int64_t m, int64_t k, int64_t n,
          bool ta, bool tb) {
  Eigen::Map<RowMajor<U>> result(c, m, n);
  if (m == 0 || n == 0) return;
  if (k == 0) {
    result.setZero();
    return;
  }
  using In = Eigen::Map<const RowMajor<U>>;
  if (!ta && !tb) {
    result.noalias() = In(a, m, k) * In(b, k, n);
  } else if (ta && !tb) {
    result.noalias() = In(a, k, m).transpose() * In(b, k, n);
  } else if (!ta && tb) {
    result.noalias() = In(a, m, k) * In(b, n, k).transpose();
  } else {
    result.noalias() = In(a, k, m).transpose() * In(b, n, k).transpose();
  }
}

// A rank-1 a is a (1, k) row and a rank-1 b a (k, 1) column (numpy's
// rule); the batch dimensions in front broadcast, each operand's batch
// offset following its broadcast strides.
struct Plan {
  int64_t m = 1, k = 1, n = 1;
  Shape batch;
  std::vector<int64_t> a_strides, b_strides;  // in matrices, per batch dim
};

Plan MakePlan(const Shape& as, const Shape& bs) {
  Plan p;
  Shape a = as, b = bs;
  if (a.size() == 1) a.insert(a.begin(), 1);
  if (b.size() == 1) b.push_back(1);
  p.m = a[a.size() - 2];
  p.k = a.back();
  p.n = b.back();
  const Shape a_batch(a.begin(), a.end() - 2), b_batch(b.begin(), b.end() - 2);
  const size_t rank = std::max(a_batch.size(), b_batch.size());
  p.batch.assign(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da =
        i + a_batch.size() >= rank ? a_batch[i + a_batch.size() - rank] : 1;
    const int64_t db =
        i + b_batch.size() >= rank ? b_batch[i + b_batch.size() - rank] : 1;
    p.batch[i] = da == 1 ? db : da;
  }
  p.a_strides = BroadcastStrides(a_batch, p.batch);
  p.b_strides = BroadcastStrides(b_batch, p.batch);
  return p;
}

template <typename T>
void MatMulTyped(const Plan& p, const T* a, const T* b, T* c, bool ta,
                 bool tb) {
  using U = Wrap<T>;
  const int64_t batches = NumElements(p.batch);
  const int rank = static_cast<int>(p.batch.size());
  for (int64_t i = 0; i < batches; ++i) {
    int64_t rem = i, a_off = 0, b_off = 0;
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t idx = rem % p.batch[d];
      rem /= p.batch[d];
      a_off += idx * p.a_strides[d];
      b_off += idx * p.b_strides[d];
    }
    Gemm<U>(reinterpret_cast<const U*>(a) + a_off * p.m * p.k,
            reinterpret_cast<const U*>(b) + b_off * p.k * p.n,
            reinterpret_cast<U*>(c) + i * p.m * p.n, p.m, p.k, p.n, ta, tb);
  }
}

}  // namespace

absl::StatusOr<Value> MatMul(Budget& budget, const Instr& in, const Value& a,
                             const Value& b, bool a_transposed,
                             bool b_transposed) {
  SHARD_ASSIGN_OR_RETURN(Value out, budget.Allocate(in.type));
  auto logical = [](const Value& v, bool transposed) {
    return transposed ? Shape{v.shape[1], v.shape[0]} : v.shape;
  };
  const Plan plan =
      MakePlan(logical(a, a_transposed), logical(b, b_transposed));
  VisitElem(in.type.elem, [&](auto tag) {
    using T = decltype(tag);
    MatMulTyped<T>(plan, a.as<T>(), b.as<T>(), out.mutable_as<T>(),
                   a_transposed, b_transposed);
  });
  if (in.type.elem == ElemType::kBool) {
    int32_t* o = out.mutable_as<int32_t>();
    for (int64_t i = 0; i < out.count(); ++i) o[i] = o[i] != 0;
  }
  return out;
}

}  // namespace program
}  // namespace shardmap
