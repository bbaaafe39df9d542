// A dense, C-order, little-endian array: dtype, shape and owned bytes.
//
// Tensors are move-only; copy with Clone(). Not thread-safe: a tensor shared
// between threads must be read-only. Element data is 64-byte aligned.
#ifndef SHARDMAP_CORE_TENSOR_H_
#define SHARDMAP_CORE_TENSOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/dtype.h"

namespace shardmap {

using Shape = std::vector<int64_t>;

// Product of the dimensions (1 for a scalar).
int64_t NumElements(const Shape& shape);
// JAX's form, as in error messages: "float32[8,4]", "int32[]".
std::string ShapeString(DType dtype, const Shape& shape);
// numpy's tuple form: "(8, 4)", "(3,)", "()".
std::string ShapeTuple(const Shape& shape);

class Tensor {
 public:
  // A float32 scalar holding 0.
  Tensor();
  // Zero-filled. Aborts on a negative dimension; use Create for untrusted
  // shapes.
  Tensor(DType dtype, Shape shape);

  // INVALID_ARGUMENT for a negative dimension or a size that overflows;
  // RESOURCE_EXHAUSTED if more than `max_bytes` would be allocated. The
  // contents are uninitialized.
  static absl::StatusOr<Tensor> Create(DType dtype, Shape shape,
                                       uint64_t max_bytes = UINT64_MAX);

  Tensor(Tensor&&) noexcept = default;
  Tensor& operator=(Tensor&&) noexcept = default;
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;

  Tensor Clone() const;

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t num_elements() const { return NumElements(shape_); }
  size_t num_bytes() const { return num_elements() * ItemSize(dtype_); }

  uint8_t* data() { return data_.get(); }
  const uint8_t* data() const { return data_.get(); }
  template <typename T>
  T* data_as() {
    return reinterpret_cast<T*>(data_.get());
  }
  template <typename T>
  const T* data_as() const {
    return reinterpret_cast<const T*>(data_.get());
  }

 private:
  // Returns the buffer to BufferCache::Global().
  struct AlignedDelete {
    AlignedDelete() : bytes(0) {}
    explicit AlignedDelete(size_t size) : bytes(size) {}
    size_t bytes;
    void operator()(uint8_t* p) const;
  };
  static std::unique_ptr<uint8_t[], AlignedDelete> Allocate(size_t bytes);

  DType dtype_ = DType::kFloat32;
  Shape shape_;
  std::unique_ptr<uint8_t[], AlignedDelete> data_;
};

}  // namespace shardmap

#endif  // SHARDMAP_CORE_TENSOR_H_
