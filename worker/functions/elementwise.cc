#include "worker/functions/elementwise.h"

#include <Eigen/Core>
#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "worker/functions/kernel_util.h"

namespace shardmap {
namespace builtin {
namespace {

using Shape = std::vector<int64_t>;

template <typename T>
using Vec = Eigen::Array<T, Eigen::Dynamic, 1>;

enum class BinaryOp { kAdd, kMul };

template <typename U>
U Apply(BinaryOp op, U a, U b) {
  return op == BinaryOp::kAdd ? a + b : a * b;
}

// Element strides of `shape` seen as an `out_rank`-dimensional broadcast
// operand: 0 along dimensions it is broadcast over (size 1 or missing).
std::vector<int64_t> BroadcastStrides(const Shape& shape, int out_rank) {
  std::vector<int64_t> strides(out_rank, 0);
  int64_t stride = 1;
  for (int i = static_cast<int>(shape.size()) - 1, o = out_rank - 1; i >= 0;
       --i, --o) {
    strides[o] = shape[i] == 1 ? 0 : stride;
    stride *= shape[i];
  }
  return strides;
}

// The general case. Walks the output in C order: the innermost dimension is
// a strided loop, the outer ones advance an odometer (`index`) that keeps
// the two input offsets in step.
template <typename U>
void BroadcastApply(BinaryOp op, const TensorView& x, const TensorView& y,
                    const TensorView& out) {
  const U* xd = x.data_as<U>();
  const U* yd = y.data_as<U>();
  U* od = out.data_as<U>();
  const Shape& shape = out.shape();
  const int rank = out.rank();
  const int64_t n = out.num_elements();
  if (n == 0) return;
  if (rank == 0) {
    od[0] = Apply(op, xd[0], yd[0]);
    return;
  }
  const std::vector<int64_t> sx = BroadcastStrides(x.shape(), rank);
  const std::vector<int64_t> sy = BroadcastStrides(y.shape(), rank);
  const int64_t inner = shape[rank - 1];
  const int64_t ix = sx[rank - 1], iy = sy[rank - 1];
  std::vector<int64_t> index(rank, 0);
  int64_t ox = 0, oy = 0;
  for (int64_t base = 0; base < n; base += inner) {
    for (int64_t j = 0; j < inner; ++j) {
      od[base + j] = Apply(op, xd[ox + j * ix], yd[oy + j * iy]);
    }
    for (int d = rank - 2; d >= 0; --d) {
      ox += sx[d];
      oy += sy[d];
      if (++index[d] < shape[d]) break;
      ox -= sx[d] * shape[d];
      oy -= sy[d] * shape[d];
      index[d] = 0;
    }
  }
}

// Fast paths over Eigen maps for equal shapes and a one-element operand;
// the broadcast walk otherwise.
template <typename U>
void BinaryTyped(BinaryOp op, const TensorView& x, const TensorView& y,
                 const TensorView& out) {
  const int64_t n = out.num_elements();
  Eigen::Map<Vec<U>> o(out.data_as<U>(), n);
  Eigen::Map<const Vec<U>> a(x.data_as<U>(), x.num_elements());
  Eigen::Map<const Vec<U>> b(y.data_as<U>(), y.num_elements());
  const bool add = op == BinaryOp::kAdd;
  if (x.shape() == y.shape()) {
    if (add)
      o = a + b;
    else
      o = a * b;
  } else if (b.size() == 1 && a.size() == n) {
    if (add)
      o = a + b[0];
    else
      o = a * b[0];
  } else if (a.size() == 1 && b.size() == n) {
    if (add)
      o = b + a[0];
    else
      o = b * a[0];
  } else {
    BroadcastApply<U>(op, x, y, out);
  }
}

absl::StatusOr<TensorView> Binary(Context& ctx, absl::string_view fn,
                                  BinaryOp op, const TensorView& x,
                                  const TensorView& y) {
  if (x.dtype() != y.dtype()) {
    return absl::InvalidArgumentError(
        absl::StrCat(fn, " needs x and y to have one dtype, but x is ",
                     DTypeName(x.dtype()), " and y is ", DTypeName(y.dtype())));
  }
  BUILTIN_ASSIGN_OR_RETURN(Shape shape,
                           BroadcastShapes(fn, x.shape(), y.shape()));
  BUILTIN_ASSIGN_OR_RETURN(TensorView out,
                           ctx.AllocateUninitialized(x.dtype(), shape));
  sdk::VisitDType(x.dtype(), [&](auto tag) {
    BinaryTyped<Wrapping<decltype(tag)>>(op, x, y, out);
  });
  return out;
}

// alpha as an integer of type T, or INVALID_ARGUMENT if it does not fit.
template <typename T>
absl::StatusOr<T> IntegerAlpha(const nlohmann::json& alpha) {
  const bool fits =
      alpha.is_number_unsigned()
          ? alpha.get<uint64_t>() <=
                static_cast<uint64_t>(std::numeric_limits<T>::max())
          : alpha.get<int64_t>() >= std::numeric_limits<T>::min() &&
                alpha.get<int64_t>() <= std::numeric_limits<T>::max();
  if (!fits) {
    return absl::InvalidArgumentError(
        absl::StrCat("scale: alpha ", alpha.dump(), " does not fit in ",
                     sizeof(T) == 4 ? "int32" : "int64", ", the dtype of x"));
  }
  return static_cast<T>(alpha.get<int64_t>());
}

template <typename T>
absl::StatusOr<TensorView> ScaleTyped(Context& ctx, const TensorView& x,
                                      const nlohmann::json& alpha) {
  const int64_t n = x.num_elements();
  if constexpr (std::is_floating_point_v<T>) {
    Eigen::Map<Vec<T>>(x.data_as<T>(), n) *=
        static_cast<T>(alpha.get<double>());
    return x;
  } else {
    if (alpha.is_number_integer()) {
      BUILTIN_ASSIGN_OR_RETURN(T factor, IntegerAlpha<T>(alpha));
      using U = Wrapping<T>;
      Eigen::Map<Vec<U>>(x.data_as<U>(), n) *= static_cast<U>(factor);
      return x;
    }
    // int32 -> float32 and int64 -> float64, as JAX promotes int * float.
    using F = std::conditional_t<sizeof(T) == 4, float, double>;
    const DType dtype = sizeof(T) == 4 ? DType::kFloat32 : DType::kFloat64;
    BUILTIN_ASSIGN_OR_RETURN(TensorView out,
                             ctx.AllocateUninitialized(dtype, x.shape()));
    Eigen::Map<Vec<F>>(out.data_as<F>(), n) =
        Eigen::Map<const Vec<T>>(x.data_as<T>(), n).template cast<F>() *
        static_cast<F>(alpha.get<double>());
    return out;
  }
}

}  // namespace

absl::StatusOr<Shape> BroadcastShapes(absl::string_view fn, const Shape& x,
                                      const Shape& y) {
  const int xr = static_cast<int>(x.size()), yr = static_cast<int>(y.size());
  const int rank = std::max(xr, yr);
  Shape out(rank);
  for (int o = rank - 1, i = xr - 1, j = yr - 1; o >= 0; --o, --i, --j) {
    const int64_t a = i >= 0 ? x[i] : 1;
    const int64_t b = j >= 0 ? y[j] : 1;
    if (a != b && a != 1 && b != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          fn, ": shapes ", ShapeTuple(x), " and ", ShapeTuple(y),
          " cannot be broadcast together (dimension ", i, " of x has size ", a,
          ", dimension ", j, " of y has size ", b, ")"));
    }
    out[o] = a == 1 ? b : a;
  }
  return out;
}

absl::StatusOr<TensorView> Add(Context& ctx, const TensorView& x,
                               const TensorView& y) {
  return Binary(ctx, "add", BinaryOp::kAdd, x, y);
}

absl::StatusOr<TensorView> Mul(Context& ctx, const TensorView& x,
                               const TensorView& y) {
  return Binary(ctx, "mul", BinaryOp::kMul, x, y);
}

absl::StatusOr<TensorView> Scale(Context& ctx, const TensorView& x,
                                 const nlohmann::json& alpha) {
  if (!alpha.is_number()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "scale: keyword argument 'alpha' must be a JSON number, got ",
        alpha.dump()));
  }
  return sdk::VisitDType(x.dtype(), [&](auto tag) {
    return ScaleTyped<decltype(tag)>(ctx, x, alpha);
  });
}

TensorView Relu(const TensorView& x) {
  sdk::VisitDType(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    // Eigen's max is std::max(v, 0) = v < 0 ? 0 : v, in SIMD compares and
    // blends: NaN passes through as in jax.nn.relu, and adding +0 turns
    // -0.0 into +0.0 as np.maximum(-0.0, 0) does. (A select of the scalar 0
    // compiled to a branch per element, which random signs mispredict half
    // the time: 45x slower than scale.)
    Eigen::Map<Vec<T>> v(x.data_as<T>(), x.num_elements());
    v = v.max(T(0)) + T(0);
  });
  return x;
}

}  // namespace builtin
}  // namespace shardmap
