#include "worker/functions/reduce.h"

#include <Eigen/Core>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "worker/functions/kernel_util.h"

namespace shardmap {
namespace builtin {
namespace {

// Which axes of a rank-`rank` array `axis` names, as a mask.
absl::StatusOr<std::vector<bool>> ReducedAxes(const nlohmann::json& axis,
                                              int rank) {
  if (axis.is_null()) return std::vector<bool>(rank, true);
  std::vector<nlohmann::json> list;
  if (axis.is_number_integer()) {
    list.push_back(axis);
  } else if (axis.is_array()) {
    list.assign(axis.begin(), axis.end());
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "sum: keyword argument 'axis' must be an integer, a list of integers "
        "or null, got ",
        axis.dump()));
  }
  std::vector<bool> reduced(rank, false);
  std::vector<int64_t> given(rank, 0);
  for (const nlohmann::json& a : list) {
    const bool in_range =
        a.is_number_integer() &&
        (a.is_number_unsigned()
             ? a.get<uint64_t>() < static_cast<uint64_t>(rank)
             : a.get<int64_t>() >= -rank && a.get<int64_t>() < rank);
    if (!in_range) {
      return absl::InvalidArgumentError(
          absl::StrCat("sum: axis ", a.dump(),
                       " is out of bounds for an array of rank ", rank,
                       rank == 0 ? " (it has no axes)"
                                 : absl::StrCat(" (valid axes are ", -rank,
                                                " to ", rank - 1, ")")));
    }
    const int64_t value = a.get<int64_t>();
    const int64_t d = value < 0 ? value + rank : value;
    if (reduced[d]) {
      return absl::InvalidArgumentError(
          absl::StrCat("sum: axis ", d, " is repeated (given as ", given[d],
                       " and ", value, ") for an array of rank ", rank));
    }
    reduced[d] = true;
    given[d] = value;
  }
  return reduced;
}

// Accumulates in double for floats and in the unsigned counterpart for
// integers, whose overflow then wraps around as two's complement does.
template <typename T>
struct AccOf {
  using type = std::make_unsigned_t<T>;
};
template <>
struct AccOf<float> {
  using type = double;
};
template <>
struct AccOf<double> {
  using type = double;
};
template <typename T>
using Acc = typename AccOf<T>::type;

// Walks x in C order, with an odometer over the outer dimensions that keeps
// the output offset in step; `out_strides` is 0 along reduced dimensions.
template <typename T>
void SumTyped(const TensorView& x, const std::vector<int64_t>& out_strides,
              const TensorView& out) {
  std::vector<Acc<T>> acc(out.num_elements(), Acc<T>(0));
  const T* xd = x.data_as<T>();
  const std::vector<int64_t>& shape = x.shape();
  const int rank = x.rank();
  const int64_t n = x.num_elements();
  if (rank == 0) {
    acc[0] = static_cast<Acc<T>>(xd[0]);
  } else if (n > 0) {
    const int64_t inner = shape[rank - 1];
    // 0 when the last dimension is reduced, else 1 (it is the output's
    // last dimension too).
    const bool inner_reduced = out_strides[rank - 1] == 0;
    std::vector<int64_t> index(rank, 0);
    int64_t offset = 0;
    for (int64_t base = 0; base < n; base += inner) {
      // Each output element adds its inputs in C order either way; the
      // row add is vectorized (the same additions, the same results).
      if (inner_reduced) {
        Acc<T> s = acc[offset];
        for (int64_t j = 0; j < inner; ++j)
          s += static_cast<Acc<T>>(xd[base + j]);
        acc[offset] = s;
      } else {
        Eigen::Map<Eigen::Array<Acc<T>, Eigen::Dynamic, 1>>(acc.data() + offset,
                                                            inner) +=
            Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>(xd + base,
                                                                 inner)
                .template cast<Acc<T>>();
      }
      for (int d = rank - 2; d >= 0; --d) {
        offset += out_strides[d];
        if (++index[d] < shape[d]) break;
        offset -= out_strides[d] * shape[d];
        index[d] = 0;
      }
    }
  }
  T* od = out.data_as<T>();
  for (size_t i = 0; i < acc.size(); ++i) od[i] = static_cast<T>(acc[i]);
}

}  // namespace

absl::StatusOr<TensorView> Sum(Context& ctx, const TensorView& x,
                               const nlohmann::json& axis, bool keepdims) {
  const int rank = x.rank();
  BUILTIN_ASSIGN_OR_RETURN(std::vector<bool> reduced, ReducedAxes(axis, rank));
  std::vector<int64_t> out_shape;
  for (int d = 0; d < rank; ++d) {
    if (!reduced[d]) {
      out_shape.push_back(x.shape()[d]);
    } else if (keepdims) {
      out_shape.push_back(1);
    }
  }
  // Output strides per input dimension, 0 where the dimension is reduced.
  std::vector<int64_t> out_strides(rank, 0);
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    if (reduced[d]) continue;
    out_strides[d] = stride;
    stride *= x.shape()[d];
  }
  BUILTIN_ASSIGN_OR_RETURN(TensorView out,
                           ctx.AllocateUninitialized(x.dtype(), out_shape));
  switch (x.dtype()) {
    case DType::kFloat32:
      SumTyped<float>(x, out_strides, out);
      break;
    case DType::kFloat64:
      SumTyped<double>(x, out_strides, out);
      break;
    case DType::kInt32:
      SumTyped<int32_t>(x, out_strides, out);
      break;
    case DType::kInt64:
      SumTyped<int64_t>(x, out_strides, out);
      break;
  }
  return out;
}

}  // namespace builtin
}  // namespace shardmap
