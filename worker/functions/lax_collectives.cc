// jax.lax's collectives as built-in functions of one array (psum, pmean,
// pmax, pmin, all_gather, psum_scatter, ppermute, all_to_all) and
// axis_index, written against the public SDK as a plugin's would be.
#include <string>
#include <utility>
#include <vector>

#include "shardmap/sdk.h"
#include "worker/functions/builtin_functions.h"
#include "worker/functions/kernel_util.h"

namespace shardmap {
namespace builtin {
namespace {

using sdk::Axes;
using sdk::Function;

// The keyword arguments have been checked against the signature (types,
// defaults filled in) before a kernel runs.
int64_t IntArg(const Context& ctx, const char* name) {
  return ctx.kwargs().at(name).get<int64_t>();
}
bool BoolArg(const Context& ctx, const char* name) {
  return ctx.kwargs().at(name).get<bool>();
}

template <absl::StatusOr<TensorView> (Context::*kOp)(const TensorView&,
                                                     const Axes&)>
Result Reduce(Context& ctx, const std::vector<TensorView>& args) {
  return One((ctx.*kOp)(args[0], AxesArg(ctx)));
}

Result AllGather(Context& ctx, const std::vector<TensorView>& args) {
  return One(ctx.AllGather(args[0], AxesArg(ctx), IntArg(ctx, "axis"),
                           BoolArg(ctx, "tiled")));
}

Result PsumScatter(Context& ctx, const std::vector<TensorView>& args) {
  return One(ctx.PsumScatter(args[0], AxesArg(ctx),
                             IntArg(ctx, "scatter_dimension"),
                             BoolArg(ctx, "tiled")));
}

Result Ppermute(Context& ctx, const std::vector<TensorView>& args) {
  std::vector<std::pair<int64_t, int64_t>> perm;
  for (const nlohmann::json& p : ctx.kwargs().at("perm")) {
    perm.emplace_back(p[0].get<int64_t>(), p[1].get<int64_t>());
  }
  return One(ctx.Ppermute(args[0], AxesArg(ctx), perm));
}

Result AllToAll(Context& ctx, const std::vector<TensorView>& args) {
  return One(ctx.AllToAll(args[0], AxesArg(ctx), IntArg(ctx, "split_axis"),
                          IntArg(ctx, "concat_axis"), BoolArg(ctx, "tiled")));
}

Result AxisIndex(Context& ctx, const std::vector<TensorView>&) {
  absl::StatusOr<int64_t> index = ctx.AxisIndex(AxesArg(ctx));
  if (!index.ok()) return index.status();
  absl::StatusOr<TensorView> out = ctx.Allocate(DType::kInt32, {1});
  if (!out.ok()) return out.status();
  out->data_as<int32_t>()[0] = static_cast<int32_t>(*index);
  return std::vector<TensorView>{*out};
}

// A collective of args[0] over the "axes" keyword argument, checked by the
// coordinator by the rules of `op`.
Function Collective(const char* name, const char* op) {
  return Function(name, 1)
      .DTypes(AllDTypes())
      .Collective(op)
      .Kwarg("axes", "axes", "mesh axis name, or list of names (first major)");
}

}  // namespace

std::vector<Function> LaxCollectiveFunctions() {
  std::vector<Function> f;
  f.push_back(Collective("psum", "psum")
                  .Doc("jax.lax.psum(x, axes)")
                  .ShapeProgram("lambda x: psum(x, {axes})")
                  .Kernel(Reduce<&Context::Psum>));
  f.push_back(Collective("pmean", "psum")
                  .Doc("jax.lax.pmean(x, axes); int32 gives float32, "
                       "int64 float64")
                  .ShapeProgram("lambda x: pmean(x, {axes})")
                  .Kernel(Reduce<&Context::Pmean>));
  f.push_back(Collective("pmax", "psum")
                  .Doc("jax.lax.pmax(x, axes)")
                  .ShapeProgram("lambda x: pmax(x, {axes})")
                  .Kernel(Reduce<&Context::Pmax>));
  f.push_back(Collective("pmin", "psum")
                  .Doc("jax.lax.pmin(x, axes)")
                  .ShapeProgram("lambda x: pmin(x, {axes})")
                  .Kernel(Reduce<&Context::Pmin>));
  f.push_back(
      Collective("all_gather", "all_gather")
          .Kwarg("axis", "integer", "0", "where the blocks go")
          .Kwarg("tiled", "boolean", "false", "concatenate instead of stacking")
          .Doc("jax.lax.all_gather(x, axes, axis=, tiled=)")
          .ShapeProgram("lambda x: all_gather(x, {axes}, axis={axis}, "
                        "tiled={tiled})")
          .Kernel(AllGather));
  f.push_back(
      Collective("psum_scatter", "psum_scatter")
          .Kwarg("scatter_dimension", "integer", "0",
                 "the dimension split among the group")
          .Kwarg("tiled", "boolean", "false",
                 "keep the dimension instead of removing it")
          .Doc("jax.lax.psum_scatter(x, axes, scatter_dimension=, tiled=)")
          .ShapeProgram("lambda x: psum_scatter(x, {axes}, scatter_dimension="
                        "{scatter_dimension}, tiled={tiled})")
          .Kernel(PsumScatter));
  f.push_back(Collective("ppermute", "ppermute")
                  .Kwarg("perm", "int_pairs",
                         "[[source, destination], ...] group indices")
                  .Doc("jax.lax.ppermute(x, axes, perm); non-destinations "
                       "get zeros")
                  .ShapeProgram("lambda x: ppermute(x, {axes}, {perm})")
                  .Kernel(Ppermute));
  f.push_back(
      Collective("all_to_all", "all_to_all")
          .Kwarg("split_axis", "integer", "the dimension split up")
          .Kwarg("concat_axis", "integer", "where pieces are joined")
          .Kwarg("tiled", "boolean", "false",
                 "keep the rank instead of swapping the dimension")
          .Doc("jax.lax.all_to_all(x, axes, split_axis, concat_axis, tiled=)")
          .ShapeProgram("lambda x: all_to_all(x, {axes}, {split_axis}, "
                        "{concat_axis}, tiled={tiled})")
          .Kernel(AllToAll));
  f.push_back(Function("axis_index", 0)
                  .Collective("axes")
                  .Kwarg("axes", "axes", "mesh axis name or list of names")
                  .Doc("jax.lax.axis_index(axes) as int32 of shape [1]")
                  .ShapeProgram("lambda: axis_index({axes})[None]")
                  .Kernel(AxisIndex));
  return f;
}

}  // namespace builtin
}  // namespace shardmap
