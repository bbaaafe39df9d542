// The collectives a native function calls on its device's blocks, with
// jax.lax's semantics: psum, pmean, pmax, pmin, all_gather, psum_scatter,
// ppermute, all_to_all, axis_index, axis_size, over one mesh axis or a
// tuple of them.
//
// The group of a device is the devices that share its coordinates on every
// mesh axis not named; ranks in the group are row-major over the named
// axes in the order given (first major), not in mesh order. Collectives
// are numbered in call order; every device of a job must call the same
// collectives in the same order (a mismatch fails with both fingerprints).
//
// Not thread-safe: one communicator serves one device of one job, and its
// kernel calls it from one thread.
#ifndef SHARDMAP_WORKER_COMMUNICATOR_H_
#define SHARDMAP_WORKER_COMMUNICATOR_H_

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/mesh.h"
#include "core/tensor.h"
#include "worker/collectives/collective_types.h"
#include "worker/transport/peer_transport.h"

namespace shardmap {

using Axes = std::vector<std::string>;

class Communicator {
 public:
  struct Options {
    // The all-reduce algorithm (psum, pmean, pmax, pmin); kAuto picks by
    // size. The other collectives always pick their own.
    Algorithm algorithm = Algorithm::kAuto;
    // The job's manual axes (JAX's axis_names); empty: every axis. A
    // collective, axis_index or axis_size over another (auto) axis is
    // INVALID_ARGUMENT.
    std::vector<std::string> manual_axes;
  };
  // `mesh` and `transport` must outlive the communicator.
  Communicator(const Mesh* mesh, int64_t device, PeerTransport* transport,
               Options options);

  const Mesh& mesh() const { return *mesh_; }
  int64_t device() const { return device_; }

  // The group over `axes`. INVALID_ARGUMENT for an axis the mesh lacks or
  // an axis named twice.
  // `op` names the caller in messages.
  absl::StatusOr<GroupView> Group(const Axes& axes,
                                  const char* op = "collective") const;
  absl::StatusOr<int64_t> AxisSize(const Axes& axes) const;
  absl::StatusOr<int64_t> AxisIndex(const Axes& axes) const;

  // Same shape. Integer sums wrap around; pmean of int32 is float32, of
  // int64 float64 (true division, as JAX).
  absl::StatusOr<Tensor> Psum(const Tensor& x, const Axes& axes);
  absl::StatusOr<Tensor> Pmean(const Tensor& x, const Axes& axes);
  absl::StatusOr<Tensor> Pmax(const Tensor& x, const Axes& axes);
  absl::StatusOr<Tensor> Pmin(const Tensor& x, const Axes& axes);
  // Untiled: a new dimension of the group's size at `axis`; tiled: blocks
  // concatenated along the existing `axis`.
  absl::StatusOr<Tensor> AllGather(const Tensor& x, const Axes& axes,
                                   int64_t axis, bool tiled);
  // The group's sum, split along `scatter_dimension`; each rank keeps its
  // part (untiled: the dimension, of the group's size, is removed).
  absl::StatusOr<Tensor> PsumScatter(const Tensor& x, const Axes& axes,
                                     int64_t scatter_dimension, bool tiled);
  // `perm` is a JSON list of [source, destination] group indices; ranks
  // that receive nothing get zeros.
  absl::StatusOr<Tensor> Ppermute(const Tensor& x, const Axes& axes,
                                  const nlohmann::json& perm);
  absl::StatusOr<Tensor> AllToAll(const Tensor& x, const Axes& axes,
                                  int64_t split_axis, int64_t concat_axis,
                                  bool tiled);

 private:
  // The tag of the next collective: its number and fingerprint.
  CollectiveTag NextTag(const std::string& text);
  absl::StatusOr<Tensor> Reduce(const char* op, ReduceOp reduce,
                                const Tensor& x, const Axes& axes);

  const Mesh* const mesh_;  // Not owned.
  const int64_t device_;
  PeerTransport* const transport_;  // Not owned.
  const Options options_;
  uint64_t next_seq_ = 0;
};

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_COMMUNICATOR_H_
