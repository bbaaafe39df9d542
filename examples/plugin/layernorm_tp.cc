// layernorm_tp: layer normalization of a tensor-parallel activation, as a
// shardmap plugin. x is [rows, features] with its features split over the
// mesh axes `axes` (each device holds [rows, features / n]); gamma and beta
// are split the same way ([features / n]). One psum of the per-row sum and
// sum of squares gives every device the full row statistics:
//
//   y = (x - mean(x, -1)) / sqrt(var(x, -1) + eps) * gamma + beta
#include <cmath>
#include <string>
#include <vector>

#include "shardmap/sdk.h"

namespace {

using shardmap::sdk::Axes;
using shardmap::sdk::AxesOf;
using shardmap::sdk::Context;
using shardmap::sdk::DType;
using shardmap::sdk::TensorView;

template <typename T>
absl::StatusOr<std::vector<TensorView>> Run(Context& ctx, const TensorView& x,
                                            const TensorView& gamma,
                                            const TensorView& beta) {
  const int64_t rows = x.dim(0);
  const int64_t cols = x.dim(1);
  const Axes axes = AxesOf(ctx.kwargs().at("axes"));
  const double eps = ctx.kwargs().at("eps").get<double>();
  absl::StatusOr<int64_t> parts = ctx.AxisSize(axes);
  if (!parts.ok()) return parts.status();
  const double features = static_cast<double>(cols * *parts);

  // stats[r] = (sum of row r, sum of squares of row r) over this block.
  absl::StatusOr<TensorView> stats = ctx.Allocate(DType::kFloat64, {rows, 2});
  if (!stats.ok()) return stats.status();
  const T* xs = x.data_as<T>();
  double* s = stats->data_as<double>();
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const double v = xs[r * cols + c];
      s[2 * r] += v;
      s[2 * r + 1] += v * v;
    }
  }
  absl::StatusOr<TensorView> total = ctx.Psum(*stats, axes);
  if (!total.ok()) return total.status();

  absl::StatusOr<TensorView> y = ctx.Allocate(x.dtype(), x.shape());
  if (!y.ok()) return y.status();
  const double* t = total->data_as<double>();
  const T* g = gamma.data_as<T>();
  const T* b = beta.data_as<T>();
  T* ys = y->data_as<T>();
  for (int64_t r = 0; r < rows; ++r) {
    const double mean = t[2 * r] / features;
    const double var = t[2 * r + 1] / features - mean * mean;
    const double inv = 1.0 / std::sqrt(var + eps);
    for (int64_t c = 0; c < cols; ++c) {
      const double v = (xs[r * cols + c] - mean) * inv;
      ys[r * cols + c] = static_cast<T>(v * g[c] + b[c]);
    }
  }
  return std::vector<TensorView>{*y};
}

absl::StatusOr<std::vector<TensorView>> LayerNormTp(
    Context& ctx, const std::vector<TensorView>& args) {
  const TensorView& x = args[0];
  if (x.rank() != 2) {
    return absl::InvalidArgumentError("x must be [rows, features]");
  }
  for (int i : {1, 2}) {
    if (args[i].rank() != 1 || args[i].dim(0) != x.dim(1)) {
      return absl::InvalidArgumentError(
          std::string(i == 1 ? "gamma" : "beta") +
          " must be split like x's features: one value per column of the "
          "block");
    }
  }
  if (x.dtype() == DType::kFloat32) return Run<float>(ctx, x, args[1], args[2]);
  return Run<double>(ctx, x, args[1], args[2]);
}

}  // namespace

SHARDMAP_PLUGIN(registrar) {
  registrar.Add(
      shardmap::sdk::Function("layernorm_tp", 3)
          .DTypes({DType::kFloat32, DType::kFloat64})
          .SameDType()
          .Kwarg("axes", "axes", "the mesh axes the features are split over")
          .Kwarg("eps", "number", "1e-5", "added to the variance")
          .Collective("axes")
          .Doc("layer norm over the last axis of x, features split over "
               "`axes` (tensor parallel): (x - mean) / sqrt(var + eps) * "
               "gamma + beta")
          .ShapeProgram("lambda x, gamma, beta: x")
          .Kernel(LayerNormTp));
}
