#include "worker/functions/linalg.h"

#include <Eigen/Core>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "worker/functions/kernel_util.h"

namespace shardmap {
namespace builtin {
namespace {

template <typename T>
using RowMajor =
    Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Every case is the matrix product (m, k) @ (k, n): a rank-1 a is a
// (1, k) row, a rank-1 b is a (k, 1) column, and the result shape drops
// the dimensions that were added. C-order data is a row-major matrix, so
// the maps need no copies.
template <typename U>
void MatmulTyped(const TensorView& a, const TensorView& b, int64_t m, int64_t k,
                 int64_t n, const TensorView& out) {
  Eigen::Map<const RowMajor<U>> lhs(a.data_as<U>(), m, k);
  Eigen::Map<const RowMajor<U>> rhs(b.data_as<U>(), k, n);
  Eigen::Map<RowMajor<U>> result(out.data_as<U>(), m, n);
  result.setZero();
  if (m > 0 && n > 0 && k > 0) result.noalias() += lhs * rhs;
}

absl::Status CheckRank(const TensorView& t, const char* name) {
  if (t.rank() == 1 || t.rank() == 2) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "matmul: ", name, " has rank ", t.rank(), " (shape ",
      ShapeTuple(t.shape()), "); matmul takes arrays of rank 1 or 2"));
}

}  // namespace

absl::StatusOr<TensorView> Matmul(Context& ctx, const TensorView& a,
                                  const TensorView& b) {
  if (a.dtype() != b.dtype()) {
    return absl::InvalidArgumentError(
        absl::StrCat("matmul needs a and b to have one dtype, but a is ",
                     DTypeName(a.dtype()), " and b is ", DTypeName(b.dtype())));
  }
  if (absl::Status s = CheckRank(a, "a"); !s.ok()) return s;
  if (absl::Status s = CheckRank(b, "b"); !s.ok()) return s;
  const int64_t m = a.rank() == 2 ? a.shape()[0] : 1;
  const int64_t k = a.shape().back();
  const int64_t kb = b.shape()[0];
  const int64_t n = b.rank() == 2 ? b.shape()[1] : 1;
  if (k != kb) {
    return absl::InvalidArgumentError(
        absl::StrCat("matmul: contracting dimension of a (size ", k,
                     ") does not match b (size ", kb, "): shapes ",
                     ShapeTuple(a.shape()), " and ", ShapeTuple(b.shape())));
  }
  std::vector<int64_t> shape;
  if (a.rank() == 2) shape.push_back(m);
  if (b.rank() == 2) shape.push_back(n);
  BUILTIN_ASSIGN_OR_RETURN(TensorView out,
                           ctx.AllocateUninitialized(a.dtype(), shape));
  switch (a.dtype()) {
    case DType::kFloat32:
      MatmulTyped<float>(a, b, m, k, n, out);
      break;
    case DType::kFloat64:
      MatmulTyped<double>(a, b, m, k, n, out);
      break;
    case DType::kInt32:
      MatmulTyped<Wrapping<int32_t>>(a, b, m, k, n, out);
      break;
    case DType::kInt64:
      MatmulTyped<Wrapping<int64_t>>(a, b, m, k, n, out);
      break;
  }
  return out;
}

}  // namespace builtin
}  // namespace shardmap
