// Between the arrays' dtypes (core/dtype.h) and the element types a
// program computes with (program/ir.h), which add bool.
#ifndef SHARDMAP_PROGRAM_DTYPES_H_
#define SHARDMAP_PROGRAM_DTYPES_H_

#include "core/dtype.h"
#include "program/ir.h"

namespace shardmap {
namespace program {

inline ElemType ElemOf(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return ElemType::kFloat32;
    case DType::kFloat64:
      return ElemType::kFloat64;
    case DType::kInt32:
      return ElemType::kInt32;
    case DType::kInt64:
      return ElemType::kInt64;
  }
  return ElemType::kFloat32;
}

// The dtype an array of `elem` is stored as: bool as int32 (0 or 1), as
// the evaluator holds it.
inline DType StorageOf(ElemType elem) {
  switch (elem) {
    case ElemType::kFloat32:
      return DType::kFloat32;
    case ElemType::kFloat64:
      return DType::kFloat64;
    case ElemType::kInt64:
      return DType::kInt64;
    case ElemType::kBool:
    case ElemType::kInt32:
      return DType::kInt32;
  }
  return DType::kFloat32;
}

}  // namespace program
}  // namespace shardmap

#endif  // SHARDMAP_PROGRAM_DTYPES_H_
