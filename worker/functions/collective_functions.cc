// RegisterCollectiveBuiltins: the built-in functions that talk to the other
// devices of their job through the communicator - jax.lax's collectives as
// functions of one array (lax_collectives.cc, on the SDK), and three
// composites from the JAX ecosystem's shard_map examples.

#include "absl/strings/str_cat.h"
#include "core/collective_rules.h"
#include "core/status_util.h"
#include "worker/collectives/communicator.h"
#include "worker/functions/elementwise.h"
#include "worker/functions/function_registry.h"
#include "worker/functions/kernel_util.h"
#include "worker/functions/lax_collectives.h"
#include "worker/functions/linalg.h"
#include "worker/functions/reduce.h"
#include "worker/functions/sdk_function.h"

namespace shardmap {
namespace {

using Result = absl::StatusOr<std::vector<Tensor>>;

std::vector<DType> AllDTypes() {
  return {DType::kFloat32, DType::kFloat64, DType::kInt32, DType::kInt64};
}

// psum(x @ w): the second half of a tensor-parallel matmul, whose
// contracting dimension is split over `axes`.
Result MatmulPsumKernel(const CallContext& ctx, std::vector<Tensor>& args,
                        const nlohmann::json& kwargs) {
  SHARD_ASSIGN_OR_RETURN(auto ca,
                         PrepareCollective("matmul_psum", ctx, kwargs));
  SHARD_ASSIGN_OR_RETURN(Tensor partial, Matmul(args[0], args[1]));
  return One(ca.first->Psum(partial, ca.second));
}

// flax nnx's tensor-parallel MLP: x replicated, w1 split by columns and w2
// by rows over `axes`; each device computes its slice of the hidden layer
// and its partial output, and psum adds the partials.
Result MlpTpKernel(const CallContext& ctx, std::vector<Tensor>& args,
                   const nlohmann::json& kwargs) {
  SHARD_ASSIGN_OR_RETURN(auto ca, PrepareCollective("mlp_tp", ctx, kwargs));
  SHARD_ASSIGN_OR_RETURN(Tensor hidden, Matmul(args[0], args[1]));
  SHARD_ASSIGN_OR_RETURN(Tensor partial,
                         Matmul(Relu(std::move(hidden)), args[2]));
  return One(ca.first->Psum(partial, ca.second));
}

// brainstate's example: the sum of every element of every device's block,
// as shape [1], identical on every device of the group.
Result GlobalSumKernel(const CallContext& ctx, std::vector<Tensor>& args,
                       const nlohmann::json& kwargs) {
  SHARD_ASSIGN_OR_RETURN(auto ca, PrepareCollective("global_sum", ctx, kwargs));
  SHARD_ASSIGN_OR_RETURN(
      Tensor local, Sum(args[0], nlohmann::json(nullptr), /*keepdims=*/false));
  Tensor one(local.dtype(), {1});
  std::memcpy(one.data(), local.data(), local.num_bytes());
  return One(ca.first->Psum(one, ca.second));
}

Signature Collective(const char* name, int arity, const char* op) {
  Signature s(name, arity);
  s.DTypes(AllDTypes())
      .Collective(op)
      .Kwarg("axes", "axes", "mesh axis name, or list of names (first major)");
  return s;
}

}  // namespace

void RegisterCollectiveBuiltins(FunctionRegistry& registry) {
  // jax.lax's collectives, on the public SDK.
  for (sdk::Function& f : LaxCollectiveFunctions()) {
    MustRegisterSdk(registry, std::move(f));
  }
  MustRegister(registry,
               Collective("matmul_psum", 2, "axes")
                   .SameDType()
                   .Doc("psum(x @ w, axes)")
                   .ShapeProgram("lambda x, w: psum(x @ w, {axes})"),
               MatmulPsumKernel);
  MustRegister(
      registry,
      Collective("mlp_tp", 3, "axes")
          .SameDType()
          .Doc("psum(relu(x @ w1) @ w2, axes): flax nnx's "
               "tensor-parallel MLP")
          .ShapeProgram("lambda x, w1, w2: psum(relu(x @ w1) @ w2, {axes})"),
      MlpTpKernel);
  MustRegister(registry,
               Collective("global_sum", 1, "axes")
                   .Doc("psum of the sum of all elements, shape [1]")
                   .ShapeProgram("lambda x: psum(jnp.sum(x)[None], {axes})"),
               GlobalSumKernel);
}

}  // namespace shardmap
