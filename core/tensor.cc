#include "core/tensor.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/buffer_cache.h"
#include "core/idle_release.h"

namespace shardmap {
int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string ShapeString(DType dtype, const Shape& shape) {
  return absl::StrCat(DTypeName(dtype), "[", absl::StrJoin(shape, ","), "]");
}

std::string ShapeTuple(const Shape& shape) {
  if (shape.size() == 1) return absl::StrCat("(", shape[0], ",)");
  return absl::StrCat("(", absl::StrJoin(shape, ", "), ")");
}

void Tensor::AlignedDelete::operator()(uint8_t* p) const {
  BufferCache::Global().Free(p, bytes);
}

std::unique_ptr<uint8_t[], Tensor::AlignedDelete> Tensor::Allocate(
    size_t bytes) {
  // Never a null pointer, even for zero bytes, so data() is always valid.
  NoteMemoryActivity();
  return std::unique_ptr<uint8_t[], AlignedDelete>(
      BufferCache::Global().Allocate(bytes), AlignedDelete{bytes});
}

Tensor::Tensor() : Tensor(DType::kFloat32, {}) {}

Tensor::Tensor(DType dtype, Shape shape)
    : dtype_(dtype), shape_(std::move(shape)) {
  for (int64_t d : shape_) {
    if (d < 0) std::abort();
  }
  data_ = Allocate(num_bytes());
  std::memset(data_.get(), 0, num_bytes());
}

absl::StatusOr<Tensor> Tensor::Create(DType dtype, Shape shape,
                                      uint64_t max_bytes) {
  unsigned __int128 bytes = ItemSize(dtype);
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "dimension ", i, " of shape ", ShapeTuple(shape), " is negative"));
    }
    bytes *= static_cast<uint64_t>(shape[i]);
    if (bytes > (static_cast<unsigned __int128>(1) << 62)) {
      return absl::InvalidArgumentError(
          absl::StrCat("shape ", ShapeTuple(shape), " is too large"));
    }
  }
  if (bytes > max_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "array ", ShapeString(dtype, shape), " needs ",
        static_cast<uint64_t>(bytes), " bytes, over the limit of ", max_bytes));
  }
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  try {
    t.data_ = Allocate(static_cast<size_t>(bytes));
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate ", static_cast<uint64_t>(bytes),
                     " bytes for array ", ShapeString(dtype, t.shape_)));
  }
  return t;
}

Tensor Tensor::Clone() const {
  Tensor t;
  t.dtype_ = dtype_;
  t.shape_ = shape_;
  t.data_ = Allocate(num_bytes());
  std::memcpy(t.data_.get(), data_.get(), num_bytes());
  return t;
}

}  // namespace shardmap
