// Small helpers the built-in kernels share: wrapping one result as the
// kernel's output list, and finding the communicator and axes a
// collective function works over.
#ifndef SHARDMAP_WORKER_FUNCTIONS_KERNEL_UTIL_H_
#define SHARDMAP_WORKER_FUNCTIONS_KERNEL_UTIL_H_

#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/collective_rules.h"
#include "core/status_util.h"
#include "worker/collectives/communicator.h"
#include "worker/functions/function_registry.h"

namespace shardmap {

using KernelResult = absl::StatusOr<std::vector<Tensor>>;

// A kernel's single output.
inline KernelResult One(absl::StatusOr<Tensor> t) {
  if (!t.ok()) return t.status();
  std::vector<Tensor> out;
  out.push_back(*std::move(t));
  return out;
}

// The communicator and the "axes" keyword argument of a collective
// function. FAILED_PRECONDITION if the job runs without peers.
inline absl::StatusOr<std::pair<Communicator*, Axes>> PrepareCollective(
    const char* fn, const CallContext& ctx, const nlohmann::json& kwargs) {
  if (ctx.comm == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        fn, " needs collectives, but this job runs without a communicator"));
  }
  SHARD_ASSIGN_OR_RETURN(
      Axes axes, AxesFromJson(fn, kwargs.value("axes", nlohmann::json())));
  return std::make_pair(ctx.comm, std::move(axes));
}

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_FUNCTIONS_KERNEL_UTIL_H_
