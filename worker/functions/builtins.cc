// RegisterBuiltins: the built-in functions that need no collectives, each
// a thin adapter from the Kernel calling convention to a pure function in
// elementwise.h, linalg.h or reduce.h.
#include <utility>

#include "absl/strings/str_cat.h"
#include "worker/functions/elementwise.h"
#include "worker/functions/function_registry.h"
#include "worker/functions/kernel_util.h"
#include "worker/functions/linalg.h"
#include "worker/functions/reduce.h"

namespace shardmap {
namespace {

using Result = absl::StatusOr<std::vector<Tensor>>;

std::vector<DType> NumericDTypes() {
  return {DType::kFloat32, DType::kFloat64, DType::kInt32, DType::kInt64};
}

// CheckCall has validated the arity before a kernel runs; this keeps a
// kernel called without it from reading past `args`.
absl::Status CheckArity(const char* fn, const std::vector<Tensor>& args,
                        size_t arity) {
  if (args.size() == arity) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(fn, " takes ", arity,
                                                 " positional arguments but ",
                                                 args.size(), " were given"));
}

// The keyword argument `name`, or null when absent.
const nlohmann::json& KwargOrNull(const nlohmann::json& kwargs,
                                  const char* name) {
  static const nlohmann::json* const kNull = new nlohmann::json(nullptr);
  if (!kwargs.is_object()) return *kNull;
  auto it = kwargs.find(name);
  return it == kwargs.end() ? *kNull : *it;
}

Result IdentityKernel(const CallContext&, std::vector<Tensor>& args,
                      const nlohmann::json&) {
  if (absl::Status s = CheckArity("identity", args, 1); !s.ok()) return s;
  return One(std::move(args[0]));
}

Result AddKernel(const CallContext&, std::vector<Tensor>& args,
                 const nlohmann::json&) {
  if (absl::Status s = CheckArity("add", args, 2); !s.ok()) return s;
  return One(Add(args[0], args[1]));
}

Result MulKernel(const CallContext&, std::vector<Tensor>& args,
                 const nlohmann::json&) {
  if (absl::Status s = CheckArity("mul", args, 2); !s.ok()) return s;
  return One(Mul(args[0], args[1]));
}

Result ScaleKernel(const CallContext&, std::vector<Tensor>& args,
                   const nlohmann::json& kwargs) {
  if (absl::Status s = CheckArity("scale", args, 1); !s.ok()) return s;
  return One(Scale(std::move(args[0]), KwargOrNull(kwargs, "alpha")));
}

Result ReluKernel(const CallContext&, std::vector<Tensor>& args,
                  const nlohmann::json&) {
  if (absl::Status s = CheckArity("relu", args, 1); !s.ok()) return s;
  return One(Relu(std::move(args[0])));
}

Result MatmulKernel(const CallContext&, std::vector<Tensor>& args,
                    const nlohmann::json&) {
  if (absl::Status s = CheckArity("matmul", args, 2); !s.ok()) return s;
  return One(Matmul(args[0], args[1]));
}

Result SumKernel(const CallContext&, std::vector<Tensor>& args,
                 const nlohmann::json& kwargs) {
  if (absl::Status s = CheckArity("sum", args, 1); !s.ok()) return s;
  const nlohmann::json& keepdims = KwargOrNull(kwargs, "keepdims");
  if (!keepdims.is_null() && !keepdims.is_boolean()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sum: keyword argument 'keepdims' must be a JSON boolean, got ",
        keepdims.dump()));
  }
  return One(Sum(args[0], KwargOrNull(kwargs, "axis"),
                 keepdims.is_boolean() && keepdims.get<bool>()));
}

}  // namespace

void RegisterBuiltins(FunctionRegistry& registry) {
  MustRegister(registry,
               Signature("identity", 1)
                   .DTypes(NumericDTypes())
                   .Doc("x")
                   .ShapeProgram("lambda x: x"),
               IdentityKernel);
  MustRegister(registry,
               Signature("add", 2)
                   .DTypes(NumericDTypes())
                   .SameDType()
                   .Doc("x + y, with numpy broadcasting")
                   .ShapeProgram("lambda x, y: x + y"),
               AddKernel);
  MustRegister(registry,
               Signature("mul", 2)
                   .DTypes(NumericDTypes())
                   .SameDType()
                   .Doc("x * y, with numpy broadcasting")
                   .ShapeProgram("lambda x, y: x * y"),
               MulKernel);
  MustRegister(registry,
               Signature("scale", 1)
                   .Kwarg("alpha", "number", "the factor")
                   .DTypes(NumericDTypes())
                   .Doc("x * alpha; int x times a JSON float (even 2.0) "
                        "gives float32 (int32) or float64 (int64), as in JAX")
                   .ShapeProgram("lambda x: x * {alpha}"),
               ScaleKernel);
  MustRegister(registry,
               Signature("relu", 1)
                   .DTypes(NumericDTypes())
                   .Doc("max(x, 0) elementwise; NaN stays NaN")
                   .ShapeProgram("lambda x: relu(x)"),
               ReluKernel);
  MustRegister(registry,
               Signature("matmul", 2)
                   .DTypes(NumericDTypes())
                   .SameDType()
                   .Doc("a @ b for a and b of rank 1 or 2, as numpy")
                   .ShapeProgram("lambda a, b: a @ b"),
               MatmulKernel);
  MustRegister(registry,
               Signature("sum", 1)
                   .Kwarg("axis", "int_or_int_list_or_null", "null",
                          "axis or axes to reduce; null reduces all")
                   .Kwarg("keepdims", "boolean", "false",
                          "keep reduced axes with size 1")
                   .DTypes(NumericDTypes())
                   .Doc("sum of x over axis, in x's dtype (jnp.sum)")
                   .ShapeProgram("lambda x: jnp.sum(x, axis={axis}, "
                                 "keepdims={keepdims})"),
               SumKernel);
}

}  // namespace shardmap
