// The built-in functions with state slots (brainstate State), written
// against the public SDK: resident arrays a function reads and updates
// across calls.
//
//   accumulate(x; state buffer)       buffer += x, returns the new buffer.
//   mul_by_state(x; state w, read-only)  x * w, w broadcast as numpy.
//
// linear_sgd_step is in sgd_step.cc. The worker hands a kernel this
// device's blocks of the state slots (Context::State) and keeps what the
// kernel leaves there only if the whole job succeeds.
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "shardmap/sdk.h"
#include "worker/functions/builtin_functions.h"
#include "worker/functions/kernel_util.h"

namespace shardmap {
namespace builtin {
namespace {

using sdk::Function;
using Args = std::vector<TensorView>;

// "float32[2,3]", as JAX writes a dtype and shape.
std::string TypeText(const TensorView& t) {
  std::string s = absl::StrCat(sdk::DTypeName(t.dtype()), "[");
  for (int i = 0; i < t.rank(); ++i) {
    absl::StrAppend(&s, i > 0 ? "," : "", t.dim(i));
  }
  return s + "]";
}

// ---------------------------------------------------------------------------
// accumulate

template <typename T>
void AddInPlace(T* acc, const T* x, int64_t n) {
  // Integers wrap around (two's complement), as jnp's integer add, without
  // the undefined behavior of signed overflow.
  using U = Wrapping<T>;
  for (int64_t i = 0; i < n; ++i) {
    acc[i] = static_cast<T>(static_cast<U>(acc[i]) + static_cast<U>(x[i]));
  }
}

// brainstate's per-shard buffer: buffer += x (exactly the same dtype and
// shape, no broadcasting); returns the new buffer value (a copy: the slot
// stays the worker's).
Result Accumulate(Context& ctx, const Args& args) {
  BUILTIN_ASSIGN_OR_RETURN(TensorView buffer, StateSlot(ctx, "buffer"));
  const TensorView& x = args[0];
  if (x.dtype() != buffer.dtype()) {
    return absl::InvalidArgumentError(
        absl::StrCat("accumulate: x has dtype ", sdk::DTypeName(x.dtype()),
                     " but state 'buffer' has dtype ",
                     sdk::DTypeName(buffer.dtype()), "; they must match"));
  }
  if (x.shape() != buffer.shape()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "accumulate: x has shape ", sdk::ShapeTuple(x.shape()),
        " but state 'buffer' has shape ", sdk::ShapeTuple(buffer.shape()),
        "; they must match exactly (per-device blocks)"));
  }
  sdk::VisitDType(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    AddInPlace(buffer.data_as<T>(), x.data_as<T>(), x.num_elements());
  });
  return Args{buffer};
}

// ---------------------------------------------------------------------------
// mul_by_state

template <typename T>
void MulBroadcast(const T* x, int64_t n, const T* w, int64_t m, T* out) {
  using U = Wrapping<T>;
  for (int64_t i = 0; i < n; ++i) {
    out[i] = static_cast<T>(static_cast<U>(x[i]) * static_cast<U>(w[i % m]));
  }
}

// brainstate's `data * w.value` with a read-only weight: x times the
// state 'w', broadcast as numpy does against x's trailing dimensions. The
// worker never stores a slot the function declares read-only.
Result MulByState(Context& ctx, const Args& args) {
  BUILTIN_ASSIGN_OR_RETURN(TensorView w, StateSlot(ctx, "w"));
  const TensorView& x = args[0];
  const std::vector<int64_t>& xs = x.shape();
  const std::vector<int64_t>& ws = w.shape();
  const bool suffix = ws.size() <= xs.size() &&
                      std::equal(ws.begin(), ws.end(), xs.end() - ws.size());
  if (x.dtype() != w.dtype() || !suffix) {
    return absl::InvalidArgumentError(
        absl::StrCat("mul_by_state: state 'w' (", TypeText(w),
                     " per device) must have x's dtype and a shape x's block (",
                     TypeText(x), ") ends with, to broadcast against it"));
  }
  BUILTIN_ASSIGN_OR_RETURN(TensorView out,
                           ctx.AllocateUninitialized(x.dtype(), xs));
  sdk::VisitDType(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    MulBroadcast(x.data_as<T>(), x.num_elements(), w.data_as<T>(),
                 std::max<int64_t>(w.num_elements(), 1), out.data_as<T>());
  });
  return Args{out};
}

}  // namespace

std::vector<Function> StateFunctions() {
  std::vector<Function> f;
  f.push_back(Function("accumulate", 1)
                  .DTypes(AllDTypes())
                  .State("buffer", /*write=*/true,
                         "per-device running sum; same dtype and block shape "
                         "as x")
                  .Doc("buffer += x (brainstate's per-shard buffer); returns "
                       "the new buffer")
                  // buffer + x: the buffer has x's dtype and block shape.
                  .ShapeProgram("lambda x: x + x")
                  .Kernel(Accumulate));
  f.push_back(Function("mul_by_state", 1)
                  .DTypes(AllDTypes())
                  .State("w", /*write=*/false,
                         "read-only weight; its block's shape is a suffix "
                         "of x's block's shape")
                  .Doc("x * w (brainstate's data * w.value, w read-only, "
                       "broadcast against x's trailing dimensions)")
                  .ShapeProgram("lambda x: x + x")
                  .Kernel(MulByState));
  f.push_back(LinearSgdStepFunction());
  return f;
}

}  // namespace builtin
}  // namespace shardmap
