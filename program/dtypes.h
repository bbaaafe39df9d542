// Between the arrays' dtypes (core/dtype.h) and the element types a
// program computes with (program/ir.h), which add bool.
#ifndef SHARDMAP_PROGRAM_DTYPES_H_
#define SHARDMAP_PROGRAM_DTYPES_H_

#include "core/dtype.h"
#include "program/ir.h"

namespace shardmap {
namespace program {

inline ElemType ElemOf(::shardmap::DType dtype) {
  switch (dtype) {
    case ::shardmap::DType::kFloat32:
      return ElemType::kFloat32;
    case ::shardmap::DType::kFloat64:
      return ElemType::kFloat64;
    case ::shardmap::DType::kInt32:
      return ElemType::kInt32;
    case ::shardmap::DType::kInt64:
      return ElemType::kInt64;
  }
  return ElemType::kFloat32;
}

// The dtype an array of `elem` is stored as: bool as int32 (0 or 1), as
// the evaluator holds it.
inline ::shardmap::DType StorageOf(ElemType elem) {
  switch (elem) {
    case ElemType::kFloat32:
      return ::shardmap::DType::kFloat32;
    case ElemType::kFloat64:
      return ::shardmap::DType::kFloat64;
    case ElemType::kInt64:
      return ::shardmap::DType::kInt64;
    case ElemType::kBool:
    case ElemType::kInt32:
      return ::shardmap::DType::kInt32;
  }
  return ::shardmap::DType::kFloat32;
}

}  // namespace program
}  // namespace shardmap

#endif  // SHARDMAP_PROGRAM_DTYPES_H_
