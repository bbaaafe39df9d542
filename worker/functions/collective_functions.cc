// RegisterCollectiveBuiltins: the built-in functions that talk to the other
// devices of their job through the communicator - jax.lax's collectives as
// functions of one array, and three composites from the JAX ecosystem's
// shard_map examples.

#include "absl/strings/str_cat.h"
#include "core/collective_rules.h"
#include "core/status_util.h"
#include "worker/collectives/communicator.h"
#include "worker/functions/elementwise.h"
#include "worker/functions/function_registry.h"
#include "worker/functions/kernel_util.h"
#include "worker/functions/linalg.h"
#include "worker/functions/reduce.h"

namespace shardmap {
namespace {

using Result = absl::StatusOr<std::vector<Tensor>>;

std::vector<DType> AllDTypes() {
  return {DType::kFloat32, DType::kFloat64, DType::kInt32, DType::kInt64};
}

int64_t IntKwarg(const nlohmann::json& kwargs, const char* name) {
  return kwargs.value(name, nlohmann::json(0)).get<int64_t>();
}

bool BoolKwarg(const nlohmann::json& kwargs, const char* name) {
  return kwargs.value(name, nlohmann::json(false)).get<bool>();
}

template <absl::StatusOr<Tensor> (Communicator::*kOp)(const Tensor&,
                                                      const Axes&)>
Kernel ReduceKernel(const char* fn) {
  return [fn](const CallContext& ctx, std::vector<Tensor>& args,
              const nlohmann::json& kwargs) -> Result {
    SHARD_ASSIGN_OR_RETURN(auto ca, PrepareCollective(fn, ctx, kwargs));
    return One((ca.first->*kOp)(args[0], ca.second));
  };
}

Result AllGatherKernel(const CallContext& ctx, std::vector<Tensor>& args,
                       const nlohmann::json& kwargs) {
  SHARD_ASSIGN_OR_RETURN(auto ca, PrepareCollective("all_gather", ctx, kwargs));
  return One(ca.first->AllGather(args[0], ca.second, IntKwarg(kwargs, "axis"),
                                 BoolKwarg(kwargs, "tiled")));
}

Result PsumScatterKernel(const CallContext& ctx, std::vector<Tensor>& args,
                         const nlohmann::json& kwargs) {
  SHARD_ASSIGN_OR_RETURN(auto ca,
                         PrepareCollective("psum_scatter", ctx, kwargs));
  return One(ca.first->PsumScatter(args[0], ca.second,
                                   IntKwarg(kwargs, "scatter_dimension"),
                                   BoolKwarg(kwargs, "tiled")));
}

Result PpermuteKernel(const CallContext& ctx, std::vector<Tensor>& args,
                      const nlohmann::json& kwargs) {
  SHARD_ASSIGN_OR_RETURN(auto ca, PrepareCollective("ppermute", ctx, kwargs));
  return One(ca.first->Ppermute(args[0], ca.second,
                                kwargs.value("perm", nlohmann::json::array())));
}

Result AllToAllKernel(const CallContext& ctx, std::vector<Tensor>& args,
                      const nlohmann::json& kwargs) {
  SHARD_ASSIGN_OR_RETURN(auto ca, PrepareCollective("all_to_all", ctx, kwargs));
  return One(ca.first->AllToAll(
      args[0], ca.second, IntKwarg(kwargs, "split_axis"),
      IntKwarg(kwargs, "concat_axis"), BoolKwarg(kwargs, "tiled")));
}

Result AxisIndexKernel(const CallContext& ctx, std::vector<Tensor>& args,
                       const nlohmann::json& kwargs) {
  SHARD_ASSIGN_OR_RETURN(auto ca, PrepareCollective("axis_index", ctx, kwargs));
  SHARD_ASSIGN_OR_RETURN(int64_t index, ca.first->AxisIndex(ca.second));
  Tensor out(DType::kInt32, {1});
  out.data_as<int32_t>()[0] = static_cast<int32_t>(index);
  return One(std::move(out));
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
  MustRegister(registry,
               Collective("psum", 1, "psum")
                   .Doc("jax.lax.psum(x, axes)")
                   .ShapeProgram("lambda x: psum(x, {axes})"),
               ReduceKernel<&Communicator::Psum>("psum"));
  MustRegister(registry,
               Collective("pmean", 1, "psum")
                   .Doc("jax.lax.pmean(x, axes); int32 gives float32, "
                        "int64 float64")
                   .ShapeProgram("lambda x: pmean(x, {axes})"),
               ReduceKernel<&Communicator::Pmean>("pmean"));
  MustRegister(registry,
               Collective("pmax", 1, "psum")
                   .Doc("jax.lax.pmax(x, axes)")
                   .ShapeProgram("lambda x: pmax(x, {axes})"),
               ReduceKernel<&Communicator::Pmax>("pmax"));
  MustRegister(registry,
               Collective("pmin", 1, "psum")
                   .Doc("jax.lax.pmin(x, axes)")
                   .ShapeProgram("lambda x: pmin(x, {axes})"),
               ReduceKernel<&Communicator::Pmin>("pmin"));
  MustRegister(
      registry,
      Collective("all_gather", 1, "all_gather")
          .Kwarg("axis", "integer", "0", "where the blocks go")
          .Kwarg("tiled", "boolean", "false", "concatenate instead of stacking")
          .Doc("jax.lax.all_gather(x, axes, axis=, tiled=)")
          .ShapeProgram("lambda x: all_gather(x, {axes}, axis={axis}, "
                        "tiled={tiled})"),
      AllGatherKernel);
  MustRegister(
      registry,
      Collective("psum_scatter", 1, "psum_scatter")
          .Kwarg("scatter_dimension", "integer", "0",
                 "the dimension split among the group")
          .Kwarg("tiled", "boolean", "false",
                 "keep the dimension instead of removing it")
          .Doc("jax.lax.psum_scatter(x, axes, scatter_dimension=, "
               "tiled=)")
          .ShapeProgram("lambda x: psum_scatter(x, {axes}, scatter_dimension="
                        "{scatter_dimension}, tiled={tiled})"),
      PsumScatterKernel);
  MustRegister(registry,
               Collective("ppermute", 1, "ppermute")
                   .Kwarg("perm", "int_pairs",
                          "[[source, destination], ...] group indices")
                   .Doc("jax.lax.ppermute(x, axes, perm); non-destinations "
                        "get zeros")
                   .ShapeProgram("lambda x: ppermute(x, {axes}, {perm})"),
               PpermuteKernel);
  MustRegister(
      registry,
      Collective("all_to_all", 1, "all_to_all")
          .Kwarg("split_axis", "integer", "the dimension split up")
          .Kwarg("concat_axis", "integer", "where pieces are joined")
          .Kwarg("tiled", "boolean", "false",
                 "keep the rank instead of swapping the dimension")
          .Doc("jax.lax.all_to_all(x, axes, split_axis, "
               "concat_axis, tiled=)")
          .ShapeProgram("lambda x: all_to_all(x, {axes}, {split_axis}, "
                        "{concat_axis}, tiled={tiled})"),
      AllToAllKernel);
  MustRegister(registry,
               Signature("axis_index", 0)
                   .Collective("axes")
                   .Kwarg("axes", "axes", "mesh axis name or list of names")
                   .Doc("jax.lax.axis_index(axes) as int32 of shape [1]")
                   .ShapeProgram("lambda: axis_index({axes})[None]"),
               AxisIndexKernel);
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
