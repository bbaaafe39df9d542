// linear_sgd_step(x, y; state params; lr, axes): one data-parallel SGD step
// of linear regression under mean squared error, written against the
// public SDK. x [n_local, d] and y [n_local] are this device's rows of the
// batch; params [d + 1] (weights, then the bias) is a replicated state
// slot updated in place; the output is the loss before the step, [1].
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "shardmap/sdk.h"
#include "worker/functions/builtin_functions.h"
#include "worker/functions/kernel_util.h"

namespace shardmap {
namespace builtin {
namespace {

using sdk::Function;
using Args = std::vector<TensorView>;

// "('data',)" or "('data', 'model')", as the messages name axes.
std::string AxesText(const sdk::Axes& axes) {
  std::vector<std::string> quoted;
  for (const std::string& a : axes) quoted.push_back(absl::StrCat("'", a, "'"));
  return absl::StrCat("(", absl::StrJoin(quoted, ", "),
                      axes.size() == 1 ? ",)" : ")");
}

// Every float accumulates in double; results are rounded to T once.
template <typename T>
Result SgdStep(Context& ctx, const TensorView& x, const TensorView& y,
               const TensorView& params, double lr) {
  const sdk::Axes axes = AxesArg(ctx);
  const int64_t n = x.dim(0);
  const int64_t d = x.dim(1);
  const T* xp = x.data_as<T>();
  const T* yp = y.data_as<T>();
  T* p = params.data_as<T>();
  const double b = static_cast<double>(p[d]);

  // packed = [sum r^2, 2 x^T r (d entries), 2 sum r, n_local]: one psum of
  // it gives every device of the group the same bytes, so the loss and the
  // updated parameters are bitwise identical on all of them.
  BUILTIN_ASSIGN_OR_RETURN(TensorView packed,
                           ctx.Allocate(DType::kFloat64, {d + 3}));
  double* s = packed.data_as<double>();
  for (int64_t i = 0; i < n; ++i) {
    const T* row = xp + i * d;
    double pred = b;
    for (int64_t j = 0; j < d; ++j) {
      pred += static_cast<double>(row[j]) * static_cast<double>(p[j]);
    }
    const double r = pred - static_cast<double>(yp[i]);
    s[0] += r * r;
    for (int64_t j = 0; j < d; ++j) {
      s[1 + j] += 2.0 * static_cast<double>(row[j]) * r;
    }
    s[d + 1] += 2.0 * r;
  }
  s[d + 2] = static_cast<double>(n);

  BUILTIN_ASSIGN_OR_RETURN(TensorView total, ctx.Psum(packed, axes));
  const double* g = total.data_as<double>();
  const double global_n = g[d + 2];
  if (global_n <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("linear_sgd_step: the global batch is empty (dimension 0 "
                     "of x sums to 0 over the axes ",
                     AxesText(axes), ")"));
  }
  BUILTIN_ASSIGN_OR_RETURN(TensorView loss,
                           ctx.AllocateUninitialized(x.dtype(), {1}));
  loss.data_as<T>()[0] = static_cast<T>(g[0] / global_n);
  for (int64_t j = 0; j <= d; ++j) {
    const double grad = g[1 + j] / global_n;
    p[j] = static_cast<T>(static_cast<double>(p[j]) - lr * grad);
  }
  return Args{loss};
}

// The shapes and dtypes of x, y and params fit one step; INVALID_ARGUMENT
// naming the argument otherwise.
absl::Status CheckStep(const TensorView& x, const TensorView& y,
                       const TensorView& params) {
  constexpr char kFn[] = "linear_sgd_step";
  const char* xt = sdk::DTypeName(x.dtype());
  if (x.dtype() != DType::kFloat32 && x.dtype() != DType::kFloat64) {
    return absl::InvalidArgumentError(absl::StrCat(
        kFn, ": x has dtype ", xt, "; it takes float32 or float64"));
  }
  if (y.dtype() != x.dtype() || params.dtype() != x.dtype()) {
    return absl::InvalidArgumentError(absl::StrCat(
        kFn, ": x, y and state 'params' must have one dtype, but they are ", xt,
        ", ", sdk::DTypeName(y.dtype()), " and ",
        sdk::DTypeName(params.dtype())));
  }
  if (x.rank() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(kFn, ": x must have rank 2 (n_local, d), got shape ",
                     sdk::ShapeTuple(x.shape())));
  }
  if (y.rank() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(kFn, ": y must have rank 1 (n_local,), got shape ",
                     sdk::ShapeTuple(y.shape())));
  }
  if (y.dim(0) != x.dim(0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        kFn, ": dimension 0 of y (size ", y.dim(0),
        ") does not match dimension 0 of x (size ", x.dim(0), "): shapes ",
        sdk::ShapeTuple(x.shape()), " and ", sdk::ShapeTuple(y.shape())));
  }
  const int64_t d = x.dim(1);
  if (params.rank() != 1 || params.dim(0) != d + 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(kFn, ": state 'params' must have shape (", d + 1,
                     ",) = (d + 1,) for d = dimension 1 of x (size ", d,
                     "), got shape ", sdk::ShapeTuple(params.shape()),
                     " (params are replicated: weights, then the bias)"));
  }
  return absl::OkStatus();
}

Result LinearSgdStep(Context& ctx, const Args& args) {
  BUILTIN_ASSIGN_OR_RETURN(TensorView params, StateSlot(ctx, "params"));
  if (absl::Status s = NeedCollectives(ctx); !s.ok()) return s;
  const TensorView& x = args[0];
  const TensorView& y = args[1];
  if (absl::Status s = CheckStep(x, y, params); !s.ok()) return s;
  const nlohmann::json& lr_json = KwargOrNull(ctx, "lr");
  if (!lr_json.is_number() || !std::isfinite(lr_json.get<double>())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "linear_sgd_step: keyword argument 'lr' must be a finite number, got ",
        lr_json.dump()));
  }
  const double lr = lr_json.get<double>();
  if (x.dtype() == DType::kFloat64) {
    return SgdStep<double>(ctx, x, y, params, lr);
  }
  return SgdStep<float>(ctx, x, y, params, lr);
}

}  // namespace

Function LinearSgdStepFunction() {
  return Function("linear_sgd_step", 2)
      .DTypes({DType::kFloat32, DType::kFloat64})
      .SameDType()
      .Collective("axes")
      .State("params", /*write=*/true,
             "replicated [d + 1]: weights, then the bias")
      .Kwarg("lr", "number", "learning rate")
      .Kwarg("axes", "axes", "\"data\"",
             "the mesh axes the batch (rows of x and y) is split over")
      .Doc(
          "one data-parallel SGD step of linear regression, MSE loss: "
          "x [n_local, d], y [n_local]; returns the loss before the "
          "step, shape [1]")
      // The residual x @ w - y (x's first row stands in for the
      // weights, which are a state), the gradient x.T @ r and the
      // loss, both summed over the batch axes: the step's shape,
      // dtype and costs.
      .ShapeProgram(
          "def step(x, y):\n"
          "    r = x @ x[0] - y\n"
          "    g = psum(x.T @ r, {axes})\n"
          "    return psum(jnp.sum(r * r)[None], {axes}) + 0 * g[:1]\n")
      .Kernel(LinearSgdStep);
}

}  // namespace builtin
}  // namespace shardmap
