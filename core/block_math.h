// The block arithmetic of shard_map: which block of an array each device
// holds under a PartitionSpec, and copying between a block (dense, C order)
// and its region of the whole array.
//
// All types here are immutable values; safe to share between threads.
#ifndef SHARDMAP_CORE_BLOCK_MATH_H_
#define SHARDMAP_CORE_BLOCK_MATH_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/mesh.h"
#include "core/partition_spec.h"
#include "core/tensor.h"

namespace shardmap {

// How one array of `global_shape` splits over `mesh` by `spec`. Dimension d
// with spec entry (a1..ak) splits into prod(size(ai)) blocks; the device at
// coordinates c holds block ((c[a1]*s[a2] + c[a2])*s[a3] + c[a3])... along
// d, row-major over the entry in its own order (JAX's make_indexer).
class BlockLayout {
 public:
  // Validates `spec` (see PartitionSpec::Validate) and divisibility: every
  // split dimension must be divisible by the product of its axes' sizes.
  // INVALID_ARGUMENT naming `what`, `value`, the dimension, its size, the
  // axes and their product otherwise.
  static absl::StatusOr<BlockLayout> Create(const Mesh& mesh,
                                            const PartitionSpec& spec,
                                            const Shape& global_shape,
                                            absl::string_view what,
                                            absl::string_view value);
  // The layout of an output whose blocks have `block_shape`: the global
  // shape multiplies each split dimension by its number of blocks.
  // INVALID_ARGUMENT if the spec does not fit the block's rank.
  static absl::StatusOr<BlockLayout> FromBlockShape(const Mesh& mesh,
                                                    const PartitionSpec& spec,
                                                    const Shape& block_shape,
                                                    absl::string_view what,
                                                    absl::string_view value);

  const Shape& global_shape() const { return global_shape_; }
  const Shape& block_shape() const { return block_shape_; }
  // Number of blocks along each dimension (1 for unsplit dimensions).
  const std::vector<int64_t>& blocks_per_dim() const { return blocks_per_dim_; }

  // Block index along each dimension for `device`.
  std::vector<int64_t> BlockIndex(int64_t device) const;
  // Element offset of the block's origin along each dimension.
  std::vector<int64_t> BlockOrigin(int64_t device) const;
  // Row-major number of the device's block among all blocks; devices with
  // the same number hold the same block (replicas).
  int64_t BlockNumber(int64_t device) const;

 private:
  BlockLayout() = default;
  Mesh mesh_ = *Mesh::Create({{"_", 1}});
  // For each dimension, the mesh positions of its spec entry's axes.
  std::vector<std::vector<int>> dim_axes_;
  Shape global_shape_;
  Shape block_shape_;
  std::vector<int64_t> blocks_per_dim_;
};

// The region a block occupies in the whole array, and byte copies between
// the block's own C-order serialization and the whole array's memory.
// Copies work on any byte range of the block, so a block can be streamed in
// chunks without materializing it.
class BlockRegion {
 public:
  BlockRegion(Shape global_shape, Shape block_shape,
              std::vector<int64_t> origin, size_t item_size);

  size_t num_bytes() const { return num_bytes_; }
  // True when the block is one contiguous run of the whole array's bytes,
  // starting at byte start() (then no copy needs to gather it).
  bool contiguous() const { return run_bytes_ == num_bytes_; }
  size_t start() const { return RunStart(0); }

  // Copies bytes [offset, offset + length) of the block out of `global`
  // (the whole array's data) into `dst`.
  void CopyOut(const uint8_t* global, size_t offset, size_t length,
               uint8_t* dst) const;
  // Copies `length` bytes of the block starting at block byte `offset` from
  // `src` into the whole array's data `global`.
  void CopyIn(const uint8_t* src, size_t offset, size_t length,
              uint8_t* global) const;
  // One past the last byte of the whole array that bytes [offset, offset +
  // length) of the block come from (0 for no bytes): what must be in before
  // CopyOut of that piece, when the whole array fills in order.
  size_t GlobalEnd(size_t offset, size_t length) const;

 private:
  // Byte offset in the whole array of the start of run `run`.
  size_t RunStart(size_t run) const;
  template <bool kOut>
  void Copy(uint8_t* global, size_t offset, size_t length,
            uint8_t* block) const;

  Shape global_shape_;
  Shape block_shape_;
  std::vector<int64_t> origin_;
  size_t item_size_;
  // The block is a set of equal contiguous runs in the whole array: the
  // dimensions after `run_dim_` are whole, so a run spans block_shape[run_dim_]
  // rows of them. Runs are numbered row-major over dims [0, run_dim_).
  int run_dim_ = -1;
  size_t run_bytes_ = 0;
  size_t num_bytes_ = 0;
  std::vector<size_t> global_strides_;  // bytes
};

// Convenience: the block of `global` that `device` holds, as a new tensor.
Tensor ExtractBlock(const Tensor& global, const BlockLayout& layout,
                    int64_t device);

}  // namespace shardmap

#endif  // SHARDMAP_CORE_BLOCK_MATH_H_
