// What the evaluator's pieces share (internal to shard_program_eval): a
// value as the evaluator holds it, the element types behind ElemType, and
// the memory budget every allocation goes through.
//
// Not thread-safe: one evaluation owns its values and its budget.
#ifndef SHARDMAP_PROGRAM_EVAL_VALUE_H_
#define SHARDMAP_PROGRAM_EVAL_VALUE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/tensor.h"
#include "program/dtypes.h"
#include "program/ir.h"
#include "program/types.h"

namespace shardmap {
namespace program {

// Calls f(T{}) with T the C++ type an elem is stored as (int32_t for bool).
template <typename F>
auto VisitElem(ElemType elem, F&& f) {
  switch (elem) {
    case ElemType::kInt64:
      return f(int64_t{});
    case ElemType::kFloat32:
      return f(float{});
    case ElemType::kFloat64:
      return f(double{});
    case ElemType::kBool:
    case ElemType::kInt32:
      break;
  }
  return f(int32_t{});
}

// One array value. Its storage may be shared with other values (a reshape
// shares its operand's buffer), so it is read-only once computed; the
// storage tensor's own shape is the one it was allocated with, `shape` is
// this value's. `counted` says whether the budget counts the storage
// (arguments are not counted).
struct Value {
  std::shared_ptr<Tensor> storage;
  Shape shape;
  ElemType elem = ElemType::kFloat32;
  bool counted = false;

  int64_t count() const { return NumElements(shape); }
  size_t bytes() const { return count() * ElemBytes(elem); }
  const uint8_t* data() const { return storage->data(); }
  uint8_t* mutable_data() { return storage->data(); }
  template <typename T>
  const T* as() const {
    return storage->data_as<T>();
  }
  template <typename T>
  T* mutable_as() {
    return storage->data_as<T>();
  }
};

// "instruction 4 (matmul at line 1, column 20)": how messages name one.
std::string Where(const Program& program, int index);

// Counts the bytes of live values and refuses, before allocating, what
// would go over the limit: RESOURCE_EXHAUSTED naming the instruction being
// run (set with SetInstruction).
class Budget {
 public:
  Budget(const Program& program, uint64_t max_bytes)
      : program_(program), max_bytes_(max_bytes) {}

  void SetInstruction(int index) { index_ = index; }
  int instruction() const { return index_; }
  const Program& program() const { return program_; }

  // Counts `bytes` more, or RESOURCE_EXHAUSTED (nothing counted).
  absl::Status Reserve(uint64_t bytes);
  void Release(uint64_t bytes) { live_ -= bytes; }
  uint64_t live() const { return live_; }
  uint64_t peak() const { return peak_; }

  // A counted, uninitialized value of `type` (its elem and shape).
  absl::StatusOr<Value> Allocate(const ValueType& type);

 private:
  const Program& program_;
  const uint64_t max_bytes_;
  int index_ = 0;
  uint64_t live_ = 0;
  uint64_t peak_ = 0;
};

// Drops one holder of `v`'s storage, releasing its bytes from the budget
// when it was the last counted holder.
void Free(Budget& budget, Value& v);

}  // namespace program
}  // namespace shardmap

#endif  // SHARDMAP_PROGRAM_EVAL_VALUE_H_
