// RegisterTestBuiltins: psum with an injected fault, so system tests can
// reproduce the failures docs/RELIABILITY.md lists with real processes. A
// worker registers them only when started with --test-functions.
//
//   spin(x; axes, seconds, device=-1)
//       device `device` (every device when -1) keeps one core busy for
//       `seconds`, polling for cancellation, then every device returns
//       psum(x, axes). A long compute, or one rank alive but stuck while
//       its peers wait in the psum.
//   fail_on(x; axes, device)
//       device `device` fails with UNKNOWN "fail_on: injected failure on
//       device D" while the others wait in psum(x, axes): a user function
//       that raises on one rank only.
//   mismatch_on(x; axes, device)
//       device `device` psums the sum of its block (a scalar) while the
//       others psum their block: a collective whose shape differs across
//       ranks, which must fail everyone with both fingerprints.

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/status_util.h"
#include "worker/collectives/communicator.h"
#include "worker/functions/function_registry.h"
#include "worker/functions/kernel_util.h"
#include "worker/functions/reduce.h"

namespace shardmap {
namespace {

bool Targets(const CallContext& ctx, const nlohmann::json& kwargs) {
  const int64_t device = kwargs.value("device", nlohmann::json(-1));
  return device < 0 || device == ctx.device_id;
}

// Busy work for `seconds`, or CANCELLED as soon as the job is.
absl::Status Spin(const CallContext& ctx, double seconds) {
  const absl::Time start = absl::Now();
  const absl::Time end = start + absl::Seconds(seconds);
  volatile uint64_t sink = 0;
  while (absl::Now() < end) {
    if (ctx.cancelled()) {
      return absl::CancelledError(absl::StrCat(
          "spin on device ", ctx.device_id, " was cancelled after ",
          absl::FormatDuration(absl::Now() - start)));
    }
    for (int i = 0; i < 100000; ++i) sink = sink * 6364136223846793005u + i;
  }
  return absl::OkStatus();
}

KernelResult SpinKernel(const CallContext& ctx, std::vector<Tensor>& args,
                        const nlohmann::json& kwargs) {
  SHARD_ASSIGN_OR_RETURN(auto ca, PrepareCollective("spin", ctx, kwargs));
  if (Targets(ctx, kwargs)) {
    SHARD_RETURN_IF_ERROR(Spin(ctx, kwargs.value("seconds", 0.0)));
  }
  return One(ca.first->Psum(args[0], ca.second));
}

KernelResult FailOnKernel(const CallContext& ctx, std::vector<Tensor>& args,
                          const nlohmann::json& kwargs) {
  SHARD_ASSIGN_OR_RETURN(auto ca, PrepareCollective("fail_on", ctx, kwargs));
  if (Targets(ctx, kwargs)) {
    return absl::UnknownError(
        absl::StrCat("fail_on: injected failure on device ", ctx.device_id));
  }
  return One(ca.first->Psum(args[0], ca.second));
}

KernelResult MismatchOnKernel(const CallContext& ctx, std::vector<Tensor>& args,
                              const nlohmann::json& kwargs) {
  SHARD_ASSIGN_OR_RETURN(auto ca,
                         PrepareCollective("mismatch_on", ctx, kwargs));
  if (Targets(ctx, kwargs)) {
    SHARD_ASSIGN_OR_RETURN(Tensor total, Sum(args[0], nlohmann::json(nullptr),
                                             /*keepdims=*/false));
    return One(ca.first->Psum(total, ca.second));
  }
  return One(ca.first->Psum(args[0], ca.second));
}

Signature FaultyPsum(const char* name) {
  Signature s(name, 1);
  s.DTypes({DType::kFloat32, DType::kFloat64, DType::kInt32, DType::kInt64})
      .Collective("psum")
      .Kwarg("axes", "axes", "mesh axis name, or list of names (first major)");
  return s;
}

}  // namespace

void RegisterTestBuiltins(FunctionRegistry& registry) {
  MustRegister(registry,
               FaultyPsum("spin")
                   .Kwarg("seconds", "number", "how long to keep a core busy")
                   .Kwarg("device", "integer", "-1",
                          "the device that spins; -1 = every device")
                   .Doc("psum(x, axes) after `seconds` of busy work (a test "
                        "function)"),
               SpinKernel);
  MustRegister(registry,
               FaultyPsum("fail_on")
                   .Kwarg("device", "integer", "the device that fails")
                   .Doc("psum(x, axes), but device `device` fails (a test "
                        "function)"),
               FailOnKernel);
  MustRegister(registry,
               FaultyPsum("mismatch_on")
                   .Kwarg("device", "integer", "the device that differs")
                   .Doc("psum(x, axes), but device `device` psums a scalar "
                        "(a test function)"),
               MismatchOnKernel);
}

}  // namespace shardmap
