#include "server/output_buffers.h"

#include <utility>

namespace shardmap {

OutputBuffers::OutputBuffers(const JobPlan& plan, uint64_t max_job_bytes)
    : plan_(plan),
      budget_(max_job_bytes > plan.input_bytes()
                  ? max_job_bytes - plan.input_bytes()
                  : 0),
      outputs_(plan.out_specs.size()) {}

ChunkSequencer::Sink OutputBuffers::SinkFor(size_t o, int64_t d,
                                            const ArrayMeta& block) {
  absl::MutexLock lock(&mu_);
  Output& out = outputs_[o];
  if (!out.tried) {
    out.tried = true;
    out.block = block;
    // Errors are the assembly's to report, with their full context.
    absl::StatusOr<BlockLayout> layout = BlockLayout::FromBlockShape(
        plan_.mesh, plan_.out_specs[o], block.shape, "out_specs", "output");
    if (!layout.ok()) return nullptr;
    absl::StatusOr<Tensor> whole =
        Tensor::Create(block.dtype, layout->global_shape(), budget_);
    if (!whole.ok()) return nullptr;
    budget_ -= whole->num_bytes();
    out.layout = *std::move(layout);
    out.whole = *std::move(whole);
  }
  if (!out.whole.has_value() || block.dtype != out.block.dtype ||
      block.shape != out.block.shape) {
    return nullptr;
  }
  BlockRegion region(out.layout->global_shape(), out.layout->block_shape(),
                     out.layout->BlockOrigin(d), ItemSize(block.dtype));
  uint8_t* base = out.whole->data();
  return [region, base](size_t offset, absl::string_view data) {
    region.CopyIn(reinterpret_cast<const uint8_t*>(data.data()), offset,
                  data.size(), base);
  };
}

std::optional<Tensor> OutputBuffers::Take(size_t o) {
  absl::MutexLock lock(&mu_);
  std::optional<Tensor> whole = std::move(outputs_[o].whole);
  outputs_[o].whole.reset();
  return whole;
}

}  // namespace shardmap
