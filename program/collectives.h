// The collectives an evaluated program calls, as an interface: the worker
// adapts its Communicator (worker/collectives/communicator.h) to it, and
// tests give a fake. Semantics are jax.lax's, as the Communicator's.
#ifndef SHARDMAP_PROGRAM_COLLECTIVES_H_
#define SHARDMAP_PROGRAM_COLLECTIVES_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/tensor.h"

namespace shardmap {
namespace program {

using MeshAxes = std::vector<std::string>;

class Collectives {
 public:
  virtual ~Collectives() = default;
  virtual absl::StatusOr<Tensor> Psum(const Tensor& x,
                                      const MeshAxes& axes) = 0;
  virtual absl::StatusOr<Tensor> Pmean(const Tensor& x,
                                       const MeshAxes& axes) = 0;
  virtual absl::StatusOr<Tensor> Pmax(const Tensor& x,
                                      const MeshAxes& axes) = 0;
  virtual absl::StatusOr<Tensor> Pmin(const Tensor& x,
                                      const MeshAxes& axes) = 0;
  virtual absl::StatusOr<Tensor> AllGather(const Tensor& x,
                                           const MeshAxes& axes, int64_t axis,
                                           bool tiled) = 0;
  virtual absl::StatusOr<Tensor> PsumScatter(const Tensor& x,
                                             const MeshAxes& axes,
                                             int64_t scatter_dimension,
                                             bool tiled) = 0;
  // Pairs of (source, destination) group indices.
  virtual absl::StatusOr<Tensor> Ppermute(
      const Tensor& x, const MeshAxes& axes,
      const std::vector<std::pair<int64_t, int64_t>>& perm) = 0;
  virtual absl::StatusOr<Tensor> AllToAll(const Tensor& x, const MeshAxes& axes,
                                          int64_t split_axis,
                                          int64_t concat_axis, bool tiled) = 0;
  virtual absl::StatusOr<int64_t> AxisIndex(const MeshAxes& axes) = 0;
};

}  // namespace program
}  // namespace shardmap

#endif  // SHARDMAP_PROGRAM_COLLECTIVES_H_
