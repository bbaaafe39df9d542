#include "core/block_math.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace shardmap {
namespace {

std::string AxesClause(const Mesh& mesh, const std::vector<int>& axes,
                       int64_t product) {
  if (axes.size() == 1) {
    return absl::StrCat("mesh axis '", mesh.axes()[axes[0]].name, "' (of size ",
                        product, ")");
  }
  std::vector<std::string> names;
  for (int a : axes)
    names.push_back(absl::StrCat("'", mesh.axes()[a].name, "'"));
  return absl::StrCat("mesh axes (", absl::StrJoin(names, ", "),
                      ") (of total size ", product, ")");
}

}  // namespace

absl::StatusOr<BlockLayout> BlockLayout::Create(const Mesh& mesh,
                                                const PartitionSpec& spec,
                                                const Shape& global_shape,
                                                absl::string_view what,
                                                absl::string_view value) {
  const int rank = static_cast<int>(global_shape.size());
  if (absl::Status s = spec.Validate(mesh, rank, what, value); !s.ok()) {
    return s;
  }
  BlockLayout layout;
  layout.mesh_ = mesh;
  layout.global_shape_ = global_shape;
  layout.block_shape_ = global_shape;
  layout.blocks_per_dim_.assign(rank, 1);
  layout.dim_axes_.assign(rank, {});
  for (size_t d = 0; d < spec.entries().size(); ++d) {
    int64_t product = 1;
    for (const std::string& axis : spec.entries()[d]) {
      const int pos = *mesh.AxisPosition(axis);
      layout.dim_axes_[d].push_back(pos);
      product *= mesh.axes()[pos].size;
    }
    if (global_shape[d] % product != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          value, " of shape ", ShapeTuple(global_shape), " corresponds to ",
          what, " of value ", spec.ToString(), ", which maps array axis ", d,
          " (of size ", global_shape[d], ") to ",
          AxesClause(mesh, layout.dim_axes_[d], product), ", but ", product,
          " does not evenly divide ", global_shape[d]));
    }
    layout.blocks_per_dim_[d] = product;
    layout.block_shape_[d] = global_shape[d] / product;
  }
  return layout;
}

absl::StatusOr<BlockLayout> BlockLayout::FromBlockShape(
    const Mesh& mesh, const PartitionSpec& spec, const Shape& block_shape,
    absl::string_view what, absl::string_view value) {
  if (absl::Status s = spec.Validate(mesh, static_cast<int>(block_shape.size()),
                                     what, value);
      !s.ok()) {
    return s;
  }
  Shape global = block_shape;
  for (size_t d = 0; d < spec.entries().size(); ++d) {
    for (const std::string& axis : spec.entries()[d]) {
      global[d] *= mesh.axes()[*mesh.AxisPosition(axis)].size;
    }
  }
  return Create(mesh, spec, global, what, value);
}

std::vector<int64_t> BlockLayout::BlockIndex(int64_t device) const {
  const std::vector<int64_t> coords = mesh_.Coords(device);
  std::vector<int64_t> index(global_shape_.size(), 0);
  for (size_t d = 0; d < dim_axes_.size(); ++d) {
    int64_t i = 0;
    for (int pos : dim_axes_[d]) i = i * mesh_.axes()[pos].size + coords[pos];
    index[d] = i;
  }
  return index;
}

std::vector<int64_t> BlockLayout::BlockOrigin(int64_t device) const {
  std::vector<int64_t> origin = BlockIndex(device);
  for (size_t d = 0; d < origin.size(); ++d) origin[d] *= block_shape_[d];
  return origin;
}

int64_t BlockLayout::BlockNumber(int64_t device) const {
  const std::vector<int64_t> index = BlockIndex(device);
  int64_t n = 0;
  for (size_t d = 0; d < index.size(); ++d) {
    n = n * blocks_per_dim_[d] + index[d];
  }
  return n;
}

BlockRegion::BlockRegion(Shape global_shape, Shape block_shape,
                         std::vector<int64_t> origin, size_t item_size)
    : global_shape_(std::move(global_shape)),
      block_shape_(std::move(block_shape)),
      origin_(std::move(origin)),
      item_size_(item_size) {
  const int rank = static_cast<int>(global_shape_.size());
  global_strides_.assign(rank, item_size_);
  for (int d = rank - 2; d >= 0; --d) {
    global_strides_[d] = global_strides_[d + 1] * global_shape_[d + 1];
  }
  num_bytes_ = item_size_ * NumElements(block_shape_);
  // The innermost dimension that is not whole bounds the contiguous run.
  run_dim_ = rank - 1;
  while (run_dim_ >= 0 && block_shape_[run_dim_] == global_shape_[run_dim_]) {
    --run_dim_;
  }
  if (run_dim_ < 0) {
    run_dim_ = 0;
    run_bytes_ = num_bytes_;  // The block is the whole array (or a scalar).
    if (rank == 0) return;
  } else {
    run_bytes_ = block_shape_[run_dim_] * global_strides_[run_dim_];
  }
}

size_t BlockRegion::RunStart(size_t run) const {
  size_t start = 0;
  for (int d = run_dim_ - 1; d >= 0; --d) {
    const size_t i = run % block_shape_[d];
    run /= block_shape_[d];
    start += (origin_[d] + i) * global_strides_[d];
  }
  if (!origin_.empty()) start += origin_[run_dim_] * global_strides_[run_dim_];
  return start;
}

template <bool kOut>
void BlockRegion::Copy(uint8_t* global, size_t offset, size_t length,
                       uint8_t* block) const {
  if (length == 0 || run_bytes_ == 0) return;
  size_t run = offset / run_bytes_;
  size_t within = offset % run_bytes_;
  while (length > 0) {
    const size_t n = std::min(length, run_bytes_ - within);
    uint8_t* g = global + RunStart(run) + within;
    if (kOut) {
      std::memcpy(block, g, n);
    } else {
      std::memcpy(g, block, n);
    }
    block += n;
    length -= n;
    within = 0;
    ++run;
  }
}

void BlockRegion::CopyOut(const uint8_t* global, size_t offset, size_t length,
                          uint8_t* dst) const {
  Copy<true>(const_cast<uint8_t*>(global), offset, length, dst);
}

void BlockRegion::CopyIn(const uint8_t* src, size_t offset, size_t length,
                         uint8_t* global) const {
  Copy<false>(global, offset, length, const_cast<uint8_t*>(src));
}

size_t BlockRegion::GlobalEnd(size_t offset, size_t length) const {
  if (length == 0 || run_bytes_ == 0) return 0;
  const size_t last = offset + length - 1;
  return RunStart(last / run_bytes_) + last % run_bytes_ + 1;
}

Tensor ExtractBlock(const Tensor& global, const BlockLayout& layout,
                    int64_t device) {
  Tensor block(global.dtype(), layout.block_shape());
  BlockRegion region(layout.global_shape(), layout.block_shape(),
                     layout.BlockOrigin(device), ItemSize(global.dtype()));
  region.CopyOut(global.data(), 0, region.num_bytes(), block.data());
  return block;
}

}  // namespace shardmap
