// What a function sees of the device it runs on: the mesh, this device's
// coordinates, its keyword arguments, cancellation, memory, state slots and
// the collectives of its job (jax.lax semantics, the communicator the
// built-in functions use).
//
// The worker implements Context; a function gets one per call and uses it
// from the calling thread only (not thread-safe). Views it returns stay
// valid until the function returns.
//
// Errors: every method returning a status says what was wrong in its
// message (INVALID_ARGUMENT for an axis the mesh lacks or a shape a
// collective cannot take, RESOURCE_EXHAUSTED for memory over the worker's
// --memory-budget, FAILED_PRECONDITION for collectives in a job that runs
// without peers or a state slot that is not bound).
#ifndef SHARDMAP_SDK_CONTEXT_H_
#define SHARDMAP_SDK_CONTEXT_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "shardmap/tensor.h"

namespace shardmap {
namespace sdk {

// One mesh axis name, or a tuple of them (first major), as in jax.lax.
using Axes = std::vector<std::string>;

// The value of a keyword argument declared of type "axes" (the worker has
// checked it is a name or a list of names): as Axes.
inline Axes AxesOf(const nlohmann::json& value) {
  if (value.is_string()) return {value.get<std::string>()};
  Axes axes;
  for (const nlohmann::json& a : value) axes.push_back(a.get<std::string>());
  return axes;
}

class Context {
 public:
  virtual ~Context() = default;

  // The function's registered name (for messages).
  virtual const std::string& function() const = 0;

  // The job's mesh: axis names and sizes, in mesh order.
  virtual const std::vector<std::string>& axis_names() const = 0;
  virtual const std::vector<int64_t>& axis_sizes() const = 0;
  // This device: its id (row-major over the mesh) and its coordinates.
  virtual int64_t device_id() const = 0;
  virtual const std::vector<int64_t>& coords() const = 0;

  // The keyword arguments, checked against the signature with defaults
  // filled in (a JSON object).
  virtual const nlohmann::json& kwargs() const = 0;

  // True once the job is cancelled; a long computation polls it and
  // returns absl::CancelledError.
  virtual bool cancelled() const = 0;

  // A zero-filled, 64-byte aligned tensor owned by the worker, counted
  // against its --memory-budget until the function returns. Returning it
  // as an output hands it over without a copy.
  virtual absl::StatusOr<TensorView> Allocate(DType dtype,
                                              std::vector<int64_t> shape) = 0;
  // As Allocate, but the contents are left as they are (no zero fill): for
  // an output the function writes entirely, at no extra pass over memory.
  virtual absl::StatusOr<TensorView> AllocateUninitialized(
      DType dtype, std::vector<int64_t> shape) = 0;

  // This device's block of state slot `slot` (declared with State() in the
  // signature). Update it in place for a slot declared written; the new
  // value is kept only if the whole job succeeds.
  virtual absl::StatusOr<TensorView> State(const std::string& slot) = 0;

  // False when the job runs without peers (every collective then fails
  // with FAILED_PRECONDITION).
  virtual bool has_collectives() const = 0;
  virtual absl::StatusOr<int64_t> AxisIndex(const Axes& axes) = 0;
  virtual absl::StatusOr<int64_t> AxisSize(const Axes& axes) = 0;

  // jax.lax's collectives over `axes`; results are owned by the worker like
  // Allocate's. Every device of the job must call the same collectives in
  // the same order.
  virtual absl::StatusOr<TensorView> Psum(const TensorView& x,
                                          const Axes& axes) = 0;
  virtual absl::StatusOr<TensorView> Pmean(const TensorView& x,
                                           const Axes& axes) = 0;
  virtual absl::StatusOr<TensorView> Pmax(const TensorView& x,
                                          const Axes& axes) = 0;
  virtual absl::StatusOr<TensorView> Pmin(const TensorView& x,
                                          const Axes& axes) = 0;
  virtual absl::StatusOr<TensorView> AllGather(const TensorView& x,
                                               const Axes& axes, int64_t axis,
                                               bool tiled) = 0;
  virtual absl::StatusOr<TensorView> PsumScatter(const TensorView& x,
                                                 const Axes& axes,
                                                 int64_t scatter_dimension,
                                                 bool tiled) = 0;
  // `perm`: (source, destination) pairs of indices in the group; a device
  // that receives nothing gets zeros.
  virtual absl::StatusOr<TensorView> Ppermute(
      const TensorView& x, const Axes& axes,
      const std::vector<std::pair<int64_t, int64_t>>& perm) = 0;
  virtual absl::StatusOr<TensorView> AllToAll(const TensorView& x,
                                              const Axes& axes,
                                              int64_t split_axis,
                                              int64_t concat_axis,
                                              bool tiled) = 0;
};

}  // namespace sdk
}  // namespace shardmap

#endif  // SHARDMAP_SDK_CONTEXT_H_
