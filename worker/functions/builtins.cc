// The built-in functions that need no collectives (identity, add, mul,
// scale, relu, matmul, sum), written against the public SDK as a plugin's
// would be: each kernel is a thin adapter to elementwise.h, linalg.h or
// reduce.h.
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "shardmap/sdk.h"
#include "worker/functions/builtin_functions.h"
#include "worker/functions/elementwise.h"
#include "worker/functions/kernel_util.h"
#include "worker/functions/linalg.h"
#include "worker/functions/reduce.h"

namespace shardmap {
namespace builtin {
namespace {

using sdk::Function;
using Args = std::vector<TensorView>;

// Returns its argument: handed back without a copy.
Result Identity(Context&, const Args& args) { return Args{args[0]}; }

Result AddKernel(Context& ctx, const Args& args) {
  return One(Add(ctx, args[0], args[1]));
}

Result MulKernel(Context& ctx, const Args& args) {
  return One(Mul(ctx, args[0], args[1]));
}

Result ScaleKernel(Context& ctx, const Args& args) {
  return One(Scale(ctx, args[0], KwargOrNull(ctx, "alpha")));
}

Result ReluKernel(Context&, const Args& args) { return Args{Relu(args[0])}; }

Result MatmulKernel(Context& ctx, const Args& args) {
  return One(Matmul(ctx, args[0], args[1]));
}

Result SumKernel(Context& ctx, const Args& args) {
  const nlohmann::json& keepdims = KwargOrNull(ctx, "keepdims");
  if (!keepdims.is_null() && !keepdims.is_boolean()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sum: keyword argument 'keepdims' must be a JSON boolean, got ",
        keepdims.dump()));
  }
  return One(Sum(ctx, args[0], KwargOrNull(ctx, "axis"),
                 keepdims.is_boolean() && keepdims.get<bool>()));
}

// A function of `arity` arrays of any of the four dtypes.
Function Numeric(const char* name, int arity, const char* doc,
                 const char* shape_program, sdk::Kernel kernel) {
  return Function(name, arity)
      .DTypes(AllDTypes())
      .Doc(doc)
      .ShapeProgram(shape_program)
      .Kernel(std::move(kernel));
}

}  // namespace

std::vector<Function> ElementwiseFunctions() {
  std::vector<Function> f;
  f.push_back(Numeric("identity", 1, "x", "lambda x: x", Identity));
  f.push_back(Numeric("add", 2, "x + y, with numpy broadcasting",
                      "lambda x, y: x + y", AddKernel)
                  .SameDType());
  f.push_back(Numeric("mul", 2, "x * y, with numpy broadcasting",
                      "lambda x, y: x * y", MulKernel)
                  .SameDType());
  f.push_back(Numeric("scale", 1,
                      "x * alpha; int x times a JSON float (even 2.0) "
                      "gives float32 (int32) or float64 (int64), as in JAX",
                      "lambda x: x * {alpha}", ScaleKernel)
                  .Kwarg("alpha", "number", "the factor"));
  f.push_back(Numeric("relu", 1, "max(x, 0) elementwise; NaN stays NaN",
                      "lambda x: relu(x)", ReluKernel));
  f.push_back(Numeric("matmul", 2, "a @ b for a and b of rank 1 or 2, as numpy",
                      "lambda a, b: a @ b", MatmulKernel)
                  .SameDType());
  f.push_back(Numeric("sum", 1, "sum of x over axis, in x's dtype (jnp.sum)",
                      "lambda x: jnp.sum(x, axis={axis}, keepdims={keepdims})",
                      SumKernel)
                  .Kwarg("axis", "int_or_int_list_or_null", "null",
                         "axis or axes to reduce; null reduces all")
                  .Kwarg("keepdims", "boolean", "false",
                         "keep reduced axes with size 1"));
  return f;
}

}  // namespace builtin
}  // namespace shardmap
