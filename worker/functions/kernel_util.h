// Small helpers the built-in kernels share, on the public SDK only (as a
// plugin's would be): wrapping one result as the kernel's output list,
// reading checked keyword arguments, and the checks a collective function
// makes before it computes.
#ifndef SHARDMAP_WORKER_FUNCTIONS_KERNEL_UTIL_H_
#define SHARDMAP_WORKER_FUNCTIONS_KERNEL_UTIL_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "shardmap/sdk.h"

namespace shardmap {
namespace builtin {

using sdk::Context;
using sdk::DType;
using sdk::DTypeName;
using sdk::ShapeTuple;
using sdk::TensorView;
using sdk::Wrapping;
using Result = absl::StatusOr<std::vector<TensorView>>;

// Assigns the value of a StatusOr to `lhs`, or returns its status.
#define BUILTIN_ASSIGN_OR_RETURN(lhs, expr)                                 \
  BUILTIN_ASSIGN_OR_RETURN_IMPL(BUILTIN_CONCAT(builtin_or_, __LINE__), lhs, \
                                expr)
#define BUILTIN_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = *std::move(tmp)
#define BUILTIN_CONCAT(a, b) BUILTIN_CONCAT_IMPL(a, b)
#define BUILTIN_CONCAT_IMPL(a, b) a##b

// A kernel's single output.
inline Result One(absl::StatusOr<TensorView> t) {
  if (!t.ok()) return t.status();
  return std::vector<TensorView>{*std::move(t)};
}

// The four dtypes, for Function::DTypes.
inline std::vector<DType> AllDTypes() {
  return {DType::kFloat32, DType::kFloat64, DType::kInt32, DType::kInt64};
}

// FAILED_PRECONDITION "<fn> needs collectives, ..." when the job runs
// without peers: a function checks it before it computes anything.
inline absl::Status NeedCollectives(const Context& ctx) {
  if (ctx.has_collectives()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat(ctx.function(),
                   " needs collectives, but this job runs without a "
                   "communicator"));
}

// This device's block of the state slot `slot`; FAILED_PRECONDITION
// "<fn> needs its state 'slot' bound to a resident array ..." when the
// call has none.
inline absl::StatusOr<TensorView> StateSlot(Context& ctx, const char* slot) {
  absl::StatusOr<TensorView> v = ctx.State(slot);
  if (v.ok()) return v;
  return absl::FailedPreconditionError(
      absl::StrCat(ctx.function(), " needs its state '", slot,
                   "' bound to a resident array (--state ", slot, "=NAME)"));
}

// The "axes" keyword argument (checked by the worker against its type).
inline sdk::Axes AxesArg(const Context& ctx) {
  return sdk::AxesOf(ctx.kwargs().at("axes"));
}

// The keyword argument `name`, or null when absent.
inline const nlohmann::json& KwargOrNull(const Context& ctx, const char* name) {
  static const nlohmann::json* const kNull = new nlohmann::json(nullptr);
  const nlohmann::json& kwargs = ctx.kwargs();
  if (!kwargs.is_object()) return *kNull;
  auto it = kwargs.find(name);
  return it == kwargs.end() ? *kNull : *it;
}

}  // namespace builtin
}  // namespace shardmap

#endif  // SHARDMAP_WORKER_FUNCTIONS_KERNEL_UTIL_H_
