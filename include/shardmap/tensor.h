// A tensor view: dtype, shape and a pointer to dense, C-order element data
// owned by someone else (the worker, for arguments, state slots and what
// Context::Allocate returns). Copyable; copying copies the view, not the
// data. Not thread-safe beyond what the data's owner allows.
#ifndef SHARDMAP_SDK_TENSOR_H_
#define SHARDMAP_SDK_TENSOR_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace shardmap {
namespace sdk {

// numpy's float32, float64, int32, int64 (the values are part of the ABI).
enum class DType : int32_t {
  kFloat32 = 0,
  kFloat64 = 1,
  kInt32 = 2,
  kInt64 = 3
};

inline size_t ItemSize(DType dtype) {
  return dtype == DType::kFloat32 || dtype == DType::kInt32 ? 4 : 8;
}
inline const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return "float32";
    case DType::kFloat64:
      return "float64";
    case DType::kInt32:
      return "int32";
    case DType::kInt64:
      return "int64";
  }
  return "unknown";
}

// The C++ element type of a dtype, for templates: ElementOf<kFloat32> is
// float.
template <DType D>
struct ElementType;
template <>
struct ElementType<DType::kFloat32> {
  using type = float;
};
template <>
struct ElementType<DType::kFloat64> {
  using type = double;
};
template <>
struct ElementType<DType::kInt32> {
  using type = int32_t;
};
template <>
struct ElementType<DType::kInt64> {
  using type = int64_t;
};

// Calls f(T{}) with T the C++ element type of `dtype` (float for an
// unknown value) and returns its result: one generic lambda for every
// dtype.
template <typename F>
auto VisitDType(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kFloat64:
      return f(double{});
    case DType::kInt32:
      return f(int32_t{});
    case DType::kInt64:
      return f(int64_t{});
    case DType::kFloat32:
      break;
  }
  return f(float{});
}

// The type integer arithmetic runs in so that overflow wraps around (as
// numpy and XLA do) instead of being undefined: an integer's unsigned
// counterpart (the same low bits as two's complement); a float itself.
template <typename T>
using Wrapping =
    typename std::conditional_t<std::is_integral_v<T>, std::make_unsigned<T>,
                                std::common_type<T>>::type;

// numpy's tuple form of a shape, for messages: "(8, 4)", "(3,)", "()".
inline std::string ShapeTuple(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + (shape.size() == 1 ? ",)" : ")");
}

class TensorView {
 public:
  TensorView() = default;
  TensorView(DType dtype, std::vector<int64_t> shape, void* data)
      : dtype_(dtype), shape_(std::move(shape)), data_(data) {}

  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t dim(int i) const { return shape_[i]; }
  int64_t num_elements() const {
    int64_t n = 1;
    for (int64_t d : shape_) n *= d;
    return n;
  }
  size_t num_bytes() const { return num_elements() * ItemSize(dtype_); }

  void* data() const { return data_; }
  template <typename T>
  T* data_as() const {
    return static_cast<T*>(data_);
  }

 private:
  DType dtype_ = DType::kFloat32;
  std::vector<int64_t> shape_;
  void* data_ = nullptr;
};

}  // namespace sdk
}  // namespace shardmap

#endif  // SHARDMAP_SDK_TENSOR_H_
