// Gives an expression program (program/collectives.h) the job's
// Communicator, so programs and native functions share one implementation
// of every collective.
//
// Not thread-safe, as the Communicator it wraps.
#ifndef SHARDMAP_WORKER_PROGRAM_COLLECTIVES_H_
#define SHARDMAP_WORKER_PROGRAM_COLLECTIVES_H_

#include "program/collectives.h"
#include "worker/collectives/communicator.h"

namespace shardmap {

class ProgramCollectives : public program::Collectives {
 public:
  // `comm` must outlive this object.
  explicit ProgramCollectives(Communicator* comm) : comm_(comm) {}

  absl::StatusOr<Tensor> Psum(const Tensor& x,
                              const program::MeshAxes& axes) override {
    return comm_->Psum(x, axes);
  }
  absl::StatusOr<Tensor> Pmean(const Tensor& x,
                               const program::MeshAxes& axes) override {
    return comm_->Pmean(x, axes);
  }
  absl::StatusOr<Tensor> Pmax(const Tensor& x,
                              const program::MeshAxes& axes) override {
    return comm_->Pmax(x, axes);
  }
  absl::StatusOr<Tensor> Pmin(const Tensor& x,
                              const program::MeshAxes& axes) override {
    return comm_->Pmin(x, axes);
  }
  absl::StatusOr<Tensor> AllGather(const Tensor& x,
                                   const program::MeshAxes& axes, int64_t axis,
                                   bool tiled) override {
    return comm_->AllGather(x, axes, axis, tiled);
  }
  absl::StatusOr<Tensor> PsumScatter(const Tensor& x,
                                     const program::MeshAxes& axes,
                                     int64_t scatter_dimension,
                                     bool tiled) override {
    return comm_->PsumScatter(x, axes, scatter_dimension, tiled);
  }
  absl::StatusOr<Tensor> Ppermute(
      const Tensor& x, const program::MeshAxes& axes,
      const std::vector<std::pair<int64_t, int64_t>>& perm) override;
  absl::StatusOr<Tensor> AllToAll(const Tensor& x,
                                  const program::MeshAxes& axes,
                                  int64_t split_axis, int64_t concat_axis,
                                  bool tiled) override {
    return comm_->AllToAll(x, axes, split_axis, concat_axis, tiled);
  }
  absl::StatusOr<int64_t> AxisIndex(const program::MeshAxes& axes) override {
    return comm_->AxisIndex(axes);
  }

 private:
  Communicator* const comm_;  // Not owned.
};

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_PROGRAM_COLLECTIVES_H_
