// RegisterStateBuiltins: the built-in functions with state slots (brainstate
// State) - resident arrays a function reads and updates across calls.
//
//   accumulate(x; state buffer)       buffer += x, returns the new buffer.
//   mul_by_state(x; state w, read-only)  x * w, w broadcast as numpy.
//   linear_sgd_step(x, y; state params; lr, axes)
//                                     one data-parallel SGD step of linear
//                                     regression under mean squared error.
//
// The worker hands a kernel this device's blocks of the state slots in
// CallContext::states and keeps what the kernel leaves there only if the
// whole job succeeds.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/collective_rules.h"
#include "core/dtype_dispatch.h"
#include "core/status_util.h"
#include "worker/collectives/communicator.h"
#include "worker/functions/function_registry.h"
#include "worker/functions/kernel_util.h"

namespace shardmap {
namespace {

using Result = absl::StatusOr<std::vector<Tensor>>;

std::vector<DType> AllDTypes() {
  return {DType::kFloat32, DType::kFloat64, DType::kInt32, DType::kInt64};
}

Result One(Tensor t) {
  std::vector<Tensor> out;
  out.push_back(std::move(t));
  return out;
}

// CheckCall has validated the arity before a kernel runs; this keeps a
// kernel called without it from reading past `args`.
absl::Status CheckArity(const char* fn, const std::vector<Tensor>& args,
                        size_t arity) {
  if (args.size() == arity) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(fn, " takes ", arity, " positional argument",
                   arity == 1 ? "" : "s", " but ", args.size(), " were given"));
}

// This device's block of the state slot `slot`.
absl::StatusOr<Tensor*> StateSlot(const char* fn, const CallContext& ctx,
                                  const char* slot) {
  if (ctx.states != nullptr) {
    auto it = ctx.states->find(slot);
    if (it != ctx.states->end()) return &it->second;
  }
  return absl::FailedPreconditionError(
      absl::StrCat(fn, " needs its state '", slot,
                   "' bound to a resident array (--state ", slot, "=NAME)"));
}

// ---------------------------------------------------------------------------
// accumulate

template <typename T>
void AddInPlace(T* acc, const T* x, int64_t n) {
  if constexpr (std::is_integral_v<T>) {
    // Two's complement wrap-around, as jnp's integer add, without the
    // undefined behavior of signed overflow.
    using U = std::make_unsigned_t<T>;
    for (int64_t i = 0; i < n; ++i) {
      acc[i] = static_cast<T>(static_cast<U>(acc[i]) + static_cast<U>(x[i]));
    }
  } else {
    for (int64_t i = 0; i < n; ++i) acc[i] = acc[i] + x[i];
  }
}

// brainstate's per-shard buffer: buffer += x (exactly the same dtype and
// shape, no broadcasting); returns the new buffer value.
Result AccumulateKernel(const CallContext& ctx, std::vector<Tensor>& args,
                        const nlohmann::json& /*kwargs*/) {
  SHARD_RETURN_IF_ERROR(CheckArity("accumulate", args, 1));
  SHARD_ASSIGN_OR_RETURN(Tensor * buffer,
                         StateSlot("accumulate", ctx, "buffer"));
  const Tensor& x = args[0];
  if (x.dtype() != buffer->dtype()) {
    return absl::InvalidArgumentError(
        absl::StrCat("accumulate: x has dtype ", DTypeName(x.dtype()),
                     " but state 'buffer' has dtype ",
                     DTypeName(buffer->dtype()), "; they must match"));
  }
  if (x.shape() != buffer->shape()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "accumulate: x has shape ", ShapeTuple(x.shape()),
        " but state 'buffer' has shape ", ShapeTuple(buffer->shape()),
        "; they must match exactly (per-device blocks)"));
  }
  VisitDType(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    AddInPlace(buffer->data_as<T>(), x.data_as<T>(), x.num_elements());
  });
  return One(buffer->Clone());
}

// ---------------------------------------------------------------------------
// mul_by_state

template <typename T>
void MulBroadcast(const T* x, int64_t n, const T* w, int64_t m, T* out) {
  for (int64_t i = 0; i < n; ++i) {
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      out[i] = static_cast<T>(static_cast<U>(x[i]) * static_cast<U>(w[i % m]));
    } else {
      out[i] = x[i] * w[i % m];
    }
  }
}

// brainstate's `data * w.value` with a read-only weight: x times the
// state 'w', broadcast as numpy does against x's trailing dimensions. The
// worker never stores a slot the function declares read-only.
Result MulByStateKernel(const CallContext& ctx, std::vector<Tensor>& args,
                        const nlohmann::json& /*kwargs*/) {
  SHARD_RETURN_IF_ERROR(CheckArity("mul_by_state", args, 1));
  SHARD_ASSIGN_OR_RETURN(Tensor * w, StateSlot("mul_by_state", ctx, "w"));
  const Tensor& x = args[0];
  const Shape& xs = x.shape();
  const Shape& ws = w->shape();
  const bool suffix = ws.size() <= xs.size() &&
                      std::equal(ws.begin(), ws.end(), xs.end() - ws.size());
  if (x.dtype() != w->dtype() || !suffix) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mul_by_state: state 'w' (", ShapeString(w->dtype(), ws),
        " per device) must have x's dtype and a shape x's block (",
        ShapeString(x.dtype(), xs), ") ends with, to broadcast against it"));
  }
  Tensor out(x.dtype(), xs);
  VisitDType(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    MulBroadcast(x.data_as<T>(), x.num_elements(), w->data_as<T>(),
                 std::max<int64_t>(w->num_elements(), 1), out.data_as<T>());
  });
  return One(std::move(out));
}

// ---------------------------------------------------------------------------
// linear_sgd_step

// Every float accumulates in double; results are rounded to T once.
template <typename T>
Result SgdStep(Communicator* comm, const Axes& axes, const Tensor& x,
               const Tensor& y, Tensor& params, double lr) {
  const int64_t n = x.shape()[0];
  const int64_t d = x.shape()[1];
  const T* xp = x.data_as<T>();
  const T* yp = y.data_as<T>();
  T* p = params.data_as<T>();
  const double b = static_cast<double>(p[d]);

  // packed = [sum r^2, 2 x^T r (d entries), 2 sum r, n_local]: one psum of
  // it gives every device of the group the same bytes, so the loss and the
  // updated parameters are bitwise identical on all of them.
  Tensor packed(DType::kFloat64, {d + 3});
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

  SHARD_ASSIGN_OR_RETURN(Tensor total, comm->Psum(packed, axes));
  const double* g = total.data_as<double>();
  const double global_n = g[d + 2];
  if (global_n <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("linear_sgd_step: the global batch is empty (dimension 0 "
                     "of x sums to 0 over the axes ",
                     AxesText(axes), ")"));
  }
  Tensor loss(x.dtype(), {1});
  loss.data_as<T>()[0] = static_cast<T>(g[0] / global_n);
  for (int64_t j = 0; j <= d; ++j) {
    const double grad = g[1 + j] / global_n;
    p[j] = static_cast<T>(static_cast<double>(p[j]) - lr * grad);
  }
  return One(std::move(loss));
}

Result LinearSgdStepKernel(const CallContext& ctx, std::vector<Tensor>& args,
                           const nlohmann::json& kwargs) {
  constexpr char kFn[] = "linear_sgd_step";
  SHARD_RETURN_IF_ERROR(CheckArity(kFn, args, 2));
  SHARD_ASSIGN_OR_RETURN(Tensor * params, StateSlot(kFn, ctx, "params"));
  SHARD_ASSIGN_OR_RETURN(auto ca, PrepareCollective(kFn, ctx, kwargs));
  const Tensor& x = args[0];
  const Tensor& y = args[1];

  if (x.dtype() != DType::kFloat32 && x.dtype() != DType::kFloat64) {
    return absl::InvalidArgumentError(
        absl::StrCat(kFn, ": x has dtype ", DTypeName(x.dtype()),
                     "; it takes float32 or float64"));
  }
  if (y.dtype() != x.dtype() || params->dtype() != x.dtype()) {
    return absl::InvalidArgumentError(absl::StrCat(
        kFn, ": x, y and state 'params' must have one dtype, but they are ",
        DTypeName(x.dtype()), ", ", DTypeName(y.dtype()), " and ",
        DTypeName(params->dtype())));
  }
  if (x.rank() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(kFn, ": x must have rank 2 (n_local, d), got shape ",
                     ShapeTuple(x.shape())));
  }
  if (y.rank() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(kFn, ": y must have rank 1 (n_local,), got shape ",
                     ShapeTuple(y.shape())));
  }
  if (y.shape()[0] != x.shape()[0]) {
    return absl::InvalidArgumentError(absl::StrCat(
        kFn, ": dimension 0 of y (size ", y.shape()[0],
        ") does not match dimension 0 of x (size ", x.shape()[0], "): shapes ",
        ShapeTuple(x.shape()), " and ", ShapeTuple(y.shape())));
  }
  const int64_t d = x.shape()[1];
  if (params->rank() != 1 || params->shape()[0] != d + 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(kFn, ": state 'params' must have shape (", d + 1,
                     ",) = (d + 1,) for d = dimension 1 of x (size ", d,
                     "), got shape ", ShapeTuple(params->shape()),
                     " (params are replicated: weights, then the bias)"));
  }
  const nlohmann::json& lr_json = kwargs.value("lr", nlohmann::json());
  if (!lr_json.is_number() || !std::isfinite(lr_json.get<double>())) {
    return absl::InvalidArgumentError(absl::StrCat(
        kFn, ": keyword argument 'lr' must be a finite number, got ",
        lr_json.dump()));
  }
  const double lr = lr_json.get<double>();
  if (x.dtype() == DType::kFloat64) {
    return SgdStep<double>(ca.first, ca.second, x, y, *params, lr);
  }
  return SgdStep<float>(ca.first, ca.second, x, y, *params, lr);
}

}  // namespace

void RegisterStateBuiltins(FunctionRegistry& registry) {
  MustRegister(registry,
               Signature("accumulate", 1)
                   .DTypes(AllDTypes())
                   .State("buffer", /*write=*/true,
                          "per-device running sum; same dtype and block shape "
                          "as x")
                   .Doc("buffer += x (brainstate's per-shard buffer); returns "
                        "the new buffer")
                   // buffer + x: the buffer has x's dtype and block shape.
                   .ShapeProgram("lambda x: x + x"),
               AccumulateKernel);
  MustRegister(registry,
               Signature("mul_by_state", 1)
                   .DTypes(AllDTypes())
                   .State("w", /*write=*/false,
                          "read-only weight; its block's shape is a suffix "
                          "of x's block's shape")
                   .Doc("x * w (brainstate's data * w.value, w read-only, "
                        "broadcast against x's trailing dimensions)")
                   .ShapeProgram("lambda x: x + x"),
               MulByStateKernel);
  MustRegister(
      registry,
      Signature("linear_sgd_step", 2)
          .DTypes({DType::kFloat32, DType::kFloat64})
          .SameDType()
          .Collective("axes")
          .State("params", /*write=*/true,
                 "replicated [d + 1]: weights, then the bias")
          .Kwarg("lr", "number", "learning rate")
          .Kwarg("axes", "axes", "\"data\"",
                 "the mesh axes the batch (rows of x and y) is split over")
          .Doc("one data-parallel SGD step of linear regression, MSE loss: "
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
              "    return psum(jnp.sum(r * r)[None], {axes}) + 0 * g[:1]\n"),
      LinearSgdStepKernel);
}

}  // namespace shardmap
