// The checked form of an expression program: a straight-line list of
// array instructions in SSA form, with every shape, dtype, static
// attribute and varying-axes set resolved by the checker
// (program/checker.h). The evaluator (program/evaluator.h) runs it on one
// device's blocks; `shardctl plan` reads its costs.
//
// Python-level values (axis names, shapes, tuples, ints such as
// axis_size) exist only while checking: the IR holds arrays only. Weakly
// typed literals have been given their dtype by then (JAX's promotion).
#ifndef SHARDMAP_PROGRAM_IR_H_
#define SHARDMAP_PROGRAM_IR_H_

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace shardmap {
namespace program {

// Element types a program computes with. Arrays that cross the wire are
// float32, float64, int32 or int64; bool exists only inside a program
// (comparisons, masks) and is stored as one int32 0/1 per element.
enum class ElemType { kBool, kInt32, kInt64, kFloat32, kFloat64 };

// "bool", "int32", "int64", "float32", "float64".
const char* ElemTypeName(ElemType t);

// Where in the source an instruction came from: 1-based line and column.
struct SourcePos {
  int line = 0;
  int column = 0;
};

enum class OpCode {
  // Leaves. kParam: attrs.index = positional argument. kConstant: a
  // scalar or array filled with attrs.value (already of `type.elem`;
  // `shape` may be non-scalar for zeros/ones/full). kIota: arange as
  // attrs.value + attrs.step * i over a 1-D shape.
  kParam,
  kConstant,
  kIota,
  // Elementwise, unary. Operand and result have the same shape; the
  // result's elem is the op's (see checker), the operand's is already the
  // one the op computes in (the checker inserts kConvert).
  kNeg,
  kAbs,
  kExp,
  kLog,
  kLog1p,
  kSqrt,
  kTanh,
  kSin,
  kCos,
  kRelu,
  kSigmoid,
  kNot,      // logical not on bool, bitwise not on integers
  kConvert,  // to type.elem (astype, promotion)
  // Elementwise, binary, numpy broadcasting: each operand's shape
  // broadcasts to the result's. Operands share one elem; comparisons give
  // bool. kDiv is true division on floats (the checker converts integer
  // operands first); kFloorDiv and kMod follow Python's signs (as numpy).
  kAdd,
  kSub,
  kMul,
  kDiv,
  kFloorDiv,
  kMod,
  kPow,
  kMax,  // maximum
  kMin,  // minimum
  kEq,
  kNe,
  kLt,
  kLe,
  kGt,
  kGe,
  kAnd,  // logical on bool, bitwise on integers
  kOr,
  // where(cond, a, b): cond is bool; a and b share the result's elem; all
  // three broadcast to the result's shape.
  kSelect,
  // Reductions over attrs.axes (sorted, distinct, non-negative; empty =
  // none), attrs.keepdims. kReduceSum of bool is never emitted (the
  // checker converts first). kMean divides by the reduced count in the
  // result's elem (floating). kArgMax: exactly one axis in attrs.axes,
  // result int32 (first index of the maximum, as numpy).
  kReduceSum,
  kReduceMax,
  kReduceMin,
  kMean,
  kArgMax,
  // numpy matmul (@): 1-D and N-D operands, batch dims broadcast. Both
  // operands share the result's elem.
  kMatMul,
  // Layout. kTranspose: attrs.perm. kReshape: to type.shape (same count).
  // kSlice: attrs.starts/limits/strides per dimension (strides > 0,
  // normalised bounds), result shape in type. kConcatenate: along
  // attrs.axis, any number of operands. kBroadcast: to type.shape, numpy
  // rules (used where an op needs it explicitly).
  kTranspose,
  kReshape,
  kSlice,
  kConcatenate,
  kBroadcast,
  // Collectives over attrs.axes (mesh axis names, first major), jax.lax
  // semantics (worker/collectives/communicator.h). kAxisIndex has no
  // operand and gives an int32 scalar.
  kPsum,
  kPmean,
  kPmax,
  kPmin,
  kAllGather,    // attrs.axis, attrs.tiled
  kPsumScatter,  // attrs.axis (scatter_dimension), attrs.tiled
  kPpermute,     // attrs.perm_pairs
  kAllToAll,     // attrs.split_axis, attrs.axis (concat_axis), attrs.tiled
  kAxisIndex,
};

// The op's name as the source spells it ("add", "psum", ...), for messages.
const char* OpName(OpCode op);
bool IsElementwise(OpCode op);
bool IsCollective(OpCode op);

struct ValueType {
  ElemType elem = ElemType::kFloat32;
  std::vector<int64_t> shape;  // this device's block
  // Mesh axes the value may vary over (JAX's check_vma); empty when the
  // job runs with check_rep off.
  std::set<std::string> vma;
};

struct Attrs {
  int64_t index = 0;          // kParam
  double value = 0;           // kConstant, kIota start (exact for |int| < 2^53)
  int64_t int_value = 0;      // kConstant of an integer elem (exact)
  double step = 1;            // kIota
  std::vector<int64_t> axes;  // reductions
  bool keepdims = false;
  std::vector<int64_t> perm;                     // kTranspose
  std::vector<int64_t> starts, limits, strides;  // kSlice
  int64_t axis = 0;        // kConcatenate, kAllGather, kPsumScatter, kAllToAll
  int64_t split_axis = 0;  // kAllToAll
  bool tiled = false;
  std::vector<std::string> mesh_axes;                   // collectives
  std::vector<std::pair<int64_t, int64_t>> perm_pairs;  // kPpermute
};

struct Instr {
  OpCode op = OpCode::kConstant;
  std::vector<int> operands;  // indices of earlier instructions
  Attrs attrs;
  ValueType type;
  SourcePos pos;
  // Per device, filled by the checker: floating-point (or integer)
  // operations, and bytes this device sends and receives in the
  // collective (0 for other ops), by the algorithm the worker picks.
  int64_t flops = 0;
  int64_t bytes_sent = 0;
  int64_t bytes_received = 0;
};

struct Program {
  std::vector<Instr> instrs;
  std::vector<ValueType> params;  // one per positional argument
  std::vector<int> outputs;       // instruction per output, in order
  // Largest sum of bytes of the values alive at once (params included),
  // per device, under the evaluator's order with each value freed after
  // its last use.
  int64_t peak_bytes = 0;
};

}  // namespace program
}  // namespace shardmap

#endif  // SHARDMAP_PROGRAM_IR_H_
