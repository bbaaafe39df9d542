// Three composite built-in functions from the JAX ecosystem's shard_map
// examples, written against the public SDK: local compute, then a psum
// over the "axes" keyword argument.
#include <cstring>
#include <utility>
#include <vector>

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

// psum(x @ w): the second half of a tensor-parallel matmul, whose
// contracting dimension is split over `axes`.
Result MatmulPsum(Context& ctx, const Args& args) {
  if (absl::Status s = NeedCollectives(ctx); !s.ok()) return s;
  BUILTIN_ASSIGN_OR_RETURN(TensorView partial, Matmul(ctx, args[0], args[1]));
  return One(ctx.Psum(partial, AxesArg(ctx)));
}

// flax nnx's tensor-parallel MLP: x replicated, w1 split by columns and w2
// by rows over `axes`; each device computes its slice of the hidden layer
// and its partial output, and psum adds the partials.
Result MlpTp(Context& ctx, const Args& args) {
  if (absl::Status s = NeedCollectives(ctx); !s.ok()) return s;
  BUILTIN_ASSIGN_OR_RETURN(TensorView hidden, Matmul(ctx, args[0], args[1]));
  BUILTIN_ASSIGN_OR_RETURN(TensorView partial,
                           Matmul(ctx, Relu(hidden), args[2]));
  return One(ctx.Psum(partial, AxesArg(ctx)));
}

// brainstate's example: the sum of every element of every device's block,
// as shape [1], identical on every device of the group.
Result GlobalSum(Context& ctx, const Args& args) {
  if (absl::Status s = NeedCollectives(ctx); !s.ok()) return s;
  BUILTIN_ASSIGN_OR_RETURN(
      TensorView local,
      Sum(ctx, args[0], nlohmann::json(nullptr), /*keepdims=*/false));
  BUILTIN_ASSIGN_OR_RETURN(TensorView one,
                           ctx.AllocateUninitialized(local.dtype(), {1}));
  std::memcpy(one.data(), local.data(), local.num_bytes());
  return One(ctx.Psum(one, AxesArg(ctx)));
}

Function Composite(const char* name, int arity) {
  return Function(name, arity)
      .DTypes(AllDTypes())
      .Collective("axes")
      .Kwarg("axes", "axes", "mesh axis name, or list of names (first major)");
}

}  // namespace

std::vector<Function> CompositeFunctions() {
  std::vector<Function> f;
  f.push_back(Composite("matmul_psum", 2)
                  .SameDType()
                  .Doc("psum(x @ w, axes)")
                  .ShapeProgram("lambda x, w: psum(x @ w, {axes})")
                  .Kernel(MatmulPsum));
  f.push_back(
      Composite("mlp_tp", 3)
          .SameDType()
          .Doc("psum(relu(x @ w1) @ w2, axes): flax nnx's "
               "tensor-parallel MLP")
          .ShapeProgram("lambda x, w1, w2: psum(relu(x @ w1) @ w2, {axes})")
          .Kernel(MlpTp));
  f.push_back(Composite("global_sum", 1)
                  .Doc("psum of the sum of all elements, shape [1]")
                  .ShapeProgram("lambda x: psum(jnp.sum(x)[None], {axes})")
                  .Kernel(GlobalSum));
  return f;
}

}  // namespace builtin
}  // namespace shardmap
