// The worker's side of the SDK: sdk::Context over a CallContext and the
// job's Communicator, for one call of one function.
//
// Views handed to the kernel point into tensors the context can find again
// by their data pointer (the arguments, the state slots, what Allocate and
// the collectives made), so a collective on such a view and an output that
// is such a view cost no copy. A view of memory the context does not know
// is copied.
//
// Not thread-safe: one call, one thread.
#ifndef SHARDMAP_WORKER_FUNCTIONS_SDK_CONTEXT_H_
#define SHARDMAP_WORKER_FUNCTIONS_SDK_CONTEXT_H_

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/tensor.h"
#include "shardmap/context.h"
#include "worker/functions/function_registry.h"

namespace shardmap {

sdk::DType ToSdk(DType dtype);
DType FromSdk(sdk::DType dtype);
// A view of `t` (which must outlive the view).
sdk::TensorView ViewOf(Tensor& t);

class WorkerContext final : public sdk::Context {
 public:
  // All must outlive the context. The kernel may consume `args`.
  WorkerContext(const std::string& function, const CallContext& call,
                std::vector<Tensor>& args, const nlohmann::json& kwargs);

  // Views of the arguments, in order.
  std::vector<sdk::TensorView> ArgViews();
  // The kernel's outputs as tensors: each view of an argument or of a
  // tensor this context made moves out (the first time), anything else is
  // copied. INTERNAL naming the output for a null view with elements.
  absl::StatusOr<std::vector<Tensor>> TakeOutputs(
      const std::vector<sdk::TensorView>& views);

  const std::string& function() const override { return function_; }
  const std::vector<std::string>& axis_names() const override {
    FillMesh();
    return axis_names_;
  }
  const std::vector<int64_t>& axis_sizes() const override {
    FillMesh();
    return axis_sizes_;
  }
  int64_t device_id() const override { return call_.device_id; }
  const std::vector<int64_t>& coords() const override { return call_.coords; }
  const nlohmann::json& kwargs() const override { return kwargs_; }
  bool cancelled() const override { return call_.cancelled(); }

  absl::StatusOr<sdk::TensorView> Allocate(sdk::DType dtype,
                                           std::vector<int64_t> shape) override;
  absl::StatusOr<sdk::TensorView> AllocateUninitialized(
      sdk::DType dtype, std::vector<int64_t> shape) override;
  absl::StatusOr<sdk::TensorView> State(const std::string& slot) override;

  bool has_collectives() const override { return call_.comm != nullptr; }
  absl::StatusOr<int64_t> AxisIndex(const sdk::Axes& axes) override;
  absl::StatusOr<int64_t> AxisSize(const sdk::Axes& axes) override;
  absl::StatusOr<sdk::TensorView> Psum(const sdk::TensorView& x,
                                       const sdk::Axes& axes) override;
  absl::StatusOr<sdk::TensorView> Pmean(const sdk::TensorView& x,
                                        const sdk::Axes& axes) override;
  absl::StatusOr<sdk::TensorView> Pmax(const sdk::TensorView& x,
                                       const sdk::Axes& axes) override;
  absl::StatusOr<sdk::TensorView> Pmin(const sdk::TensorView& x,
                                       const sdk::Axes& axes) override;
  absl::StatusOr<sdk::TensorView> AllGather(const sdk::TensorView& x,
                                            const sdk::Axes& axes, int64_t axis,
                                            bool tiled) override;
  absl::StatusOr<sdk::TensorView> PsumScatter(const sdk::TensorView& x,
                                              const sdk::Axes& axes,
                                              int64_t scatter_dimension,
                                              bool tiled) override;
  absl::StatusOr<sdk::TensorView> Ppermute(
      const sdk::TensorView& x, const sdk::Axes& axes,
      const std::vector<std::pair<int64_t, int64_t>>& perm) override;
  absl::StatusOr<sdk::TensorView> AllToAll(const sdk::TensorView& x,
                                           const sdk::Axes& axes,
                                           int64_t split_axis,
                                           int64_t concat_axis,
                                           bool tiled) override;

 private:
  // The tensor `v` views entirely (same data, dtype and shape), or null.
  // `movable` says whether it may be moved out (not a state slot).
  Tensor* Find(const sdk::TensorView& v, bool* movable);
  // `v` as a tensor for a collective: the tensor it views, else a copy
  // kept in `copy`.
  absl::StatusOr<const Tensor*> Input(const sdk::TensorView& v, Tensor& copy);
  // Keeps `t` and returns its view. A collective's result is not counted
  // against the budget (as for a kernel that calls the communicator).
  absl::StatusOr<sdk::TensorView> Keep(absl::StatusOr<Tensor> t);
  absl::Status NeedComm(const char* op) const;
  // Allocate and AllocateUninitialized.
  absl::StatusOr<sdk::TensorView> Make(sdk::DType dtype,
                                       std::vector<int64_t> shape, bool zero);

  const std::string& function_;
  const CallContext& call_;
  std::vector<Tensor>& args_;
  const nlohmann::json& kwargs_;
  // The mesh's axes, copied on first use (most kernels never ask).
  void FillMesh() const;
  mutable bool mesh_filled_ = false;
  mutable std::vector<std::string> axis_names_;
  mutable std::vector<int64_t> axis_sizes_;
  std::vector<std::unique_ptr<Tensor>> made_;
  std::vector<std::shared_ptr<void>> reservations_;
};

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_FUNCTIONS_SDK_CONTEXT_H_
