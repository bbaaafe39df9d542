// JAX's type promotion for the program language: the dtype lattice with
// weak types, as jax.numpy applies it (jax/_src/dtypes.py), restricted to
// the element types a program has (program/ir.h).
//
// Python int and float literals are weakly typed: they take the dtype of
// the array they meet. JAX's lattice over these types is the chain
//
//   bool < int* < int32 < int64 < float* < float32 < float64
//
// (int* and float* are the weak Python int and float), so the result type
// of an operation is the highest of its operands'. A weak result stands
// for JAX's default type of its kind when it must become an array:
// int* is int32 and float* float32, as JAX without jax_enable_x64 -
// except that float* meeting an int64 array gives float64 (the JAX that
// has int64 arrays is x64), as the built-ins do.
//
// Thread-safe: pure functions.
#ifndef SHARDMAP_PROGRAM_TYPES_H_
#define SHARDMAP_PROGRAM_TYPES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "program/ir.h"

namespace shardmap {
namespace program {

// An element type and whether it is weak (only int32 and float32 can be:
// they are int* and float*).
struct DType {
  ElemType elem = ElemType::kFloat32;
  bool weak = false;
  bool operator==(const DType& o) const {
    return elem == o.elem && weak == o.weak;
  }
};

bool IsFloating(ElemType t);
bool IsInteger(ElemType t);  // int32 or int64, not bool

// The least upper bound of `a` and `b` in the lattice above.
DType Promote(DType a, DType b);
// The floating type an operation that needs one computes in (true
// division, mean, exp, ...): floats stay; bool and int32 give float32 and
// int64 gives float64 (jnp.true_divide's promote_args_inexact with x64
// types present); int* gives float*.
DType Inexact(DType t);
// Bytes per element as a program stores it (bool as an int32).
int64_t ElemBytes(ElemType t);
// JAX's short form: "float32[8,4]", "int32[]".
std::string TypeString(ElemType elem, const std::vector<int64_t>& shape);
// Parses "float32", "float64", "int32", "int64", "bool" (and "bool_").
bool ParseElemType(const std::string& name, ElemType* out);

}  // namespace program
}  // namespace shardmap

#endif  // SHARDMAP_PROGRAM_TYPES_H_
