// A well-formed plugin: plug_twice (2 * x), plug_throws (throws a C++
// exception) and plug_bad_shape (returns a shape its shape program does
// not give), for the loader's and the worker's tests.
#include <stdexcept>
#include <vector>

#include "shardmap/sdk.h"

namespace {

using shardmap::sdk::Context;
using shardmap::sdk::DType;
using shardmap::sdk::TensorView;
using Result = absl::StatusOr<std::vector<TensorView>>;

Result Twice(Context& ctx, const std::vector<TensorView>& args) {
  absl::StatusOr<TensorView> y = ctx.Allocate(args[0].dtype(), args[0].shape());
  if (!y.ok()) return y.status();
  const double* x = args[0].data_as<double>();
  double* out = y->data_as<double>();
  for (int64_t i = 0; i < y->num_elements(); ++i) out[i] = 2 * x[i];
  return std::vector<TensorView>{*y};
}

Result Throws(Context&, const std::vector<TensorView>&) {
  throw std::runtime_error("plug_throws always throws");
}

Result BadShape(Context& ctx, const std::vector<TensorView>& args) {
  absl::StatusOr<TensorView> y = ctx.Allocate(args[0].dtype(), {1});
  if (!y.ok()) return y.status();
  return std::vector<TensorView>{*y};
}

}  // namespace

SHARDMAP_PLUGIN(registrar) {
  using shardmap::sdk::Function;
  registrar.Add(Function("plug_twice", 1)
                    .DTypes({DType::kFloat64})
                    .Doc("2 * x")
                    .ShapeProgram("lambda x: x * 2.0")
                    .Kernel(Twice));
  registrar.Add(Function("plug_throws", 1)
                    .DTypes({DType::kFloat64})
                    .ShapeProgram("lambda x: x")
                    .Kernel(Throws));
  registrar.Add(Function("plug_bad_shape", 1)
                    .DTypes({DType::kFloat64})
                    .ShapeProgram("lambda x: x")
                    .Kernel(BadShape));
}
