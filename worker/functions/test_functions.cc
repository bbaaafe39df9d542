// Test functions: psum with an injected fault, so system tests can
// reproduce the failures docs/RELIABILITY.md lists with real processes.
// Written against the public SDK; a worker registers them only when
// started with --test-functions.
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

#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "shardmap/sdk.h"
#include "worker/functions/builtin_functions.h"
#include "worker/functions/kernel_util.h"
#include "worker/functions/reduce.h"

namespace shardmap {
namespace builtin {
namespace {

using sdk::Function;
using Args = std::vector<TensorView>;

bool Targets(const Context& ctx) {
  const int64_t device = ctx.kwargs().value("device", nlohmann::json(-1));
  return device < 0 || device == ctx.device_id();
}

// Busy work for `seconds`, or CANCELLED as soon as the job is.
absl::Status Spin(const Context& ctx, double seconds) {
  const absl::Time start = absl::Now();
  const absl::Time end = start + absl::Seconds(seconds);
  volatile uint64_t sink = 0;
  while (absl::Now() < end) {
    if (ctx.cancelled()) {
      return absl::CancelledError(absl::StrCat(
          "spin on device ", ctx.device_id(), " was cancelled after ",
          absl::FormatDuration(absl::Now() - start)));
    }
    for (int i = 0; i < 100000; ++i) sink = sink * 6364136223846793005u + i;
  }
  return absl::OkStatus();
}

Result SpinKernel(Context& ctx, const Args& args) {
  if (absl::Status s = NeedCollectives(ctx); !s.ok()) return s;
  if (Targets(ctx)) {
    if (absl::Status s = Spin(ctx, ctx.kwargs().value("seconds", 0.0));
        !s.ok()) {
      return s;
    }
  }
  return One(ctx.Psum(args[0], AxesArg(ctx)));
}

Result FailOnKernel(Context& ctx, const Args& args) {
  if (absl::Status s = NeedCollectives(ctx); !s.ok()) return s;
  if (Targets(ctx)) {
    return absl::UnknownError(
        absl::StrCat("fail_on: injected failure on device ", ctx.device_id()));
  }
  return One(ctx.Psum(args[0], AxesArg(ctx)));
}

Result MismatchOnKernel(Context& ctx, const Args& args) {
  if (absl::Status s = NeedCollectives(ctx); !s.ok()) return s;
  if (Targets(ctx)) {
    BUILTIN_ASSIGN_OR_RETURN(
        TensorView total,
        Sum(ctx, args[0], nlohmann::json(nullptr), /*keepdims=*/false));
    return One(ctx.Psum(total, AxesArg(ctx)));
  }
  return One(ctx.Psum(args[0], AxesArg(ctx)));
}

Function FaultyPsum(const char* name) {
  return Function(name, 1)
      .DTypes(AllDTypes())
      .Collective("psum")
      .Kwarg("axes", "axes", "mesh axis name, or list of names (first major)");
}

}  // namespace

std::vector<Function> TestFunctions() {
  std::vector<Function> f;
  f.push_back(FaultyPsum("spin")
                  .Kwarg("seconds", "number", "how long to keep a core busy")
                  .Kwarg("device", "integer", "-1",
                         "the device that spins; -1 = every device")
                  .Doc("psum(x, axes) after `seconds` of busy work (a test "
                       "function)")
                  .Kernel(SpinKernel));
  f.push_back(FaultyPsum("fail_on")
                  .Kwarg("device", "integer", "the device that fails")
                  .Doc("psum(x, axes), but device `device` fails (a test "
                       "function)")
                  .Kernel(FailOnKernel));
  f.push_back(FaultyPsum("mismatch_on")
                  .Kwarg("device", "integer", "the device that differs")
                  .Doc("psum(x, axes), but device `device` psums a scalar "
                       "(a test function)")
                  .Kernel(MismatchOnKernel));
  return f;
}

}  // namespace builtin
}  // namespace shardmap
