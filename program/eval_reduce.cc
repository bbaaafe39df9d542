#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/status_util.h"
#include "program/eval_compute.h"
#include "program/eval_layout.h"
#include "program/eval_scalar.h"

namespace shardmap {
namespace program {
namespace {

// Walks x in C order and folds each element into acc[o], o its position in
// the result: ostrides are the result's strides along kept dimensions and 0
// along reduced ones.
template <typename T, typename A, typename F>
void Fold(const T* x, const Shape& shape, const std::vector<int64_t>& ostrides,
          A* acc, F f) {
  const int64_t total = NumElements(shape);
  if (total == 0) return;
  const int rank = static_cast<int>(shape.size());
  if (rank == 0) {
    acc[0] = f(acc[0], x[0]);
    return;
  }
  const int last = rank - 1;
  const int64_t inner = shape[last], step = ostrides[last];
  std::vector<int64_t> idx(rank, 0);
  int64_t off = 0;
  for (int64_t base = 0; base < total; base += inner) {
    const T* row = x + base;
    if (step == 0) {
      A a = acc[off];
      for (int64_t j = 0; j < inner; ++j) a = f(a, row[j]);
      acc[off] = a;
    } else {
      for (int64_t j = 0; j < inner; ++j) {
        acc[off + j * step] = f(acc[off + j * step], row[j]);
      }
    }
    for (int d = last - 1; d >= 0; --d) {
      off += ostrides[d];
      if (++idx[d] < shape[d]) break;
      off -= ostrides[d] * shape[d];
      idx[d] = 0;
    }
  }
}

std::vector<int64_t> ResultStrides(const Instr& in, const Shape& x_shape) {
  Shape kept;
  std::vector<bool> reduced(x_shape.size(), false);
  for (int64_t a : in.attrs.axes) reduced[a] = true;
  for (size_t d = 0; d < x_shape.size(); ++d) {
    if (!reduced[d]) kept.push_back(x_shape[d]);
  }
  const std::vector<int64_t> kept_strides = RowMajorStrides(kept);
  std::vector<int64_t> ostrides(x_shape.size(), 0);
  for (size_t d = 0, k = 0; d < x_shape.size(); ++d) {
    if (!reduced[d]) ostrides[d] = kept_strides[k++];
  }
  return ostrides;
}

template <typename T>
void SumOrMean(const Instr& in, const Value& x, Value& out) {
  const std::vector<int64_t> ostrides = ResultStrides(in, x.shape);
  const int64_t m = out.count();
  const int64_t count = m == 0 ? 0 : x.count() / m;
  if (std::is_integral_v<T> && in.op == OpCode::kReduceSum) {
    using U = Wrap<T>;
    std::vector<U> acc(m, 0);
    Fold(x.as<T>(), x.shape, ostrides, acc.data(),
         [](U a, T v) { return static_cast<U>(a + static_cast<U>(v)); });
    VisitElem(out.elem, [&](auto tag) {
      using R = decltype(tag);
      for (int64_t i = 0; i < m; ++i)
        out.mutable_as<R>()[i] = CastElem<R>(static_cast<T>(acc[i]));
    });
    return;
  }
  std::vector<double> acc(m, 0.0);
  Fold(x.as<T>(), x.shape, ostrides, acc.data(),
       [](double a, T v) { return a + static_cast<double>(v); });
  const bool mean = in.op == OpCode::kMean;
  VisitElem(out.elem, [&](auto tag) {
    using R = decltype(tag);
    R* o = out.mutable_as<R>();
    for (int64_t i = 0; i < m; ++i) {
      o[i] = CastElem<R>(mean ? acc[i] / static_cast<double>(count) : acc[i]);
    }
  });
}

template <typename T>
void MaxOrMin(const Instr& in, const Value& x, Value& out) {
  const bool is_max = in.op == OpCode::kReduceMax;
  T init;
  if constexpr (std::is_floating_point_v<T>) {
    init = is_max ? -std::numeric_limits<T>::infinity()
                  : std::numeric_limits<T>::infinity();
  } else {
    init =
        is_max ? std::numeric_limits<T>::min() : std::numeric_limits<T>::max();
  }
  T* o = out.mutable_as<T>();
  std::fill_n(o, out.count(), init);
  const std::vector<int64_t> ostrides = ResultStrides(in, x.shape);
  if (is_max) {
    Fold(x.as<T>(), x.shape, ostrides, o, MaxElem<T>);
  } else {
    Fold(x.as<T>(), x.shape, ostrides, o, MinElem<T>);
  }
}

// x seen as (outer, n, inner) around the one reduced axis.
template <typename T>
void ArgMax(const Instr& in, const Value& x, Value& out) {
  const int64_t axis = in.attrs.axes[0];
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.shape[d];
  for (size_t d = axis + 1; d < x.shape.size(); ++d) inner *= x.shape[d];
  const int64_t n = x.shape[axis];
  const T* xd = x.as<T>();
  int32_t* o = out.mutable_as<int32_t>();
  std::vector<T> best(inner);
  for (int64_t p = 0; p < outer; ++p) {
    int32_t* arg = o + p * inner;
    std::fill_n(arg, inner, 0);
    const T* block = xd + p * n * inner;
    std::copy_n(block, inner, best.begin());
    for (int64_t j = 1; j < n; ++j) {
      const T* row = block + j * inner;
      for (int64_t i = 0; i < inner; ++i) {
        bool better = row[i] > best[i];
        if constexpr (std::is_floating_point_v<T>) {
          better = !std::isnan(best[i]) && (better || std::isnan(row[i]));
        }
        if (better) {
          best[i] = row[i];
          arg[i] = static_cast<int32_t>(j);
        }
      }
    }
  }
}

}  // namespace

absl::StatusOr<Value> Reduce(Budget& budget, const Instr& in, const Value& x) {
  SHARD_ASSIGN_OR_RETURN(Value out, budget.Allocate(in.type));
  // The accumulators of a float or mean reduction: counted while they live.
  const uint64_t temp = out.count() * sizeof(double);
  SHARD_RETURN_IF_ERROR(budget.Reserve(temp));
  VisitElem(x.elem, [&](auto tag) {
    using T = decltype(tag);
    switch (in.op) {
      case OpCode::kReduceSum:
      case OpCode::kMean:
        SumOrMean<T>(in, x, out);
        break;
      case OpCode::kReduceMax:
      case OpCode::kReduceMin:
        MaxOrMin<T>(in, x, out);
        break;
      case OpCode::kArgMax:
        ArgMax<T>(in, x, out);
        break;
      default:
        break;
    }
  });
  budget.Release(temp);
  return out;
}

}  // namespace program
}  // namespace shardmap
