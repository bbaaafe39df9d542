#include "program/ir.h"

namespace shardmap {
namespace program {

const char* ElemTypeName(ElemType t) {
  switch (t) {
    case ElemType::kBool:
      return "bool";
    case ElemType::kInt32:
      return "int32";
    case ElemType::kInt64:
      return "int64";
    case ElemType::kFloat32:
      return "float32";
    case ElemType::kFloat64:
      return "float64";
  }
  return "?";
}

const char* OpName(OpCode op) {
  switch (op) {
    case OpCode::kParam:
      return "parameter";
    case OpCode::kConstant:
      return "constant";
    case OpCode::kIota:
      return "arange";
    case OpCode::kNeg:
      return "negative";
    case OpCode::kAbs:
      return "abs";
    case OpCode::kExp:
      return "exp";
    case OpCode::kLog:
      return "log";
    case OpCode::kLog1p:
      return "log1p";
    case OpCode::kSqrt:
      return "sqrt";
    case OpCode::kTanh:
      return "tanh";
    case OpCode::kSin:
      return "sin";
    case OpCode::kCos:
      return "cos";
    case OpCode::kRelu:
      return "relu";
    case OpCode::kSigmoid:
      return "sigmoid";
    case OpCode::kNot:
      return "invert";
    case OpCode::kConvert:
      return "astype";
    case OpCode::kAdd:
      return "add";
    case OpCode::kSub:
      return "subtract";
    case OpCode::kMul:
      return "multiply";
    case OpCode::kDiv:
      return "divide";
    case OpCode::kFloorDiv:
      return "floor_divide";
    case OpCode::kMod:
      return "mod";
    case OpCode::kPow:
      return "power";
    case OpCode::kMax:
      return "maximum";
    case OpCode::kMin:
      return "minimum";
    case OpCode::kEq:
      return "equal";
    case OpCode::kNe:
      return "not_equal";
    case OpCode::kLt:
      return "less";
    case OpCode::kLe:
      return "less_equal";
    case OpCode::kGt:
      return "greater";
    case OpCode::kGe:
      return "greater_equal";
    case OpCode::kAnd:
      return "and";
    case OpCode::kOr:
      return "or";
    case OpCode::kSelect:
      return "where";
    case OpCode::kReduceSum:
      return "sum";
    case OpCode::kReduceMax:
      return "max";
    case OpCode::kReduceMin:
      return "min";
    case OpCode::kMean:
      return "mean";
    case OpCode::kArgMax:
      return "argmax";
    case OpCode::kMatMul:
      return "matmul";
    case OpCode::kTranspose:
      return "transpose";
    case OpCode::kReshape:
      return "reshape";
    case OpCode::kSlice:
      return "slice";
    case OpCode::kConcatenate:
      return "concatenate";
    case OpCode::kBroadcast:
      return "broadcast_to";
    case OpCode::kPsum:
      return "psum";
    case OpCode::kPmean:
      return "pmean";
    case OpCode::kPmax:
      return "pmax";
    case OpCode::kPmin:
      return "pmin";
    case OpCode::kAllGather:
      return "all_gather";
    case OpCode::kPsumScatter:
      return "psum_scatter";
    case OpCode::kPpermute:
      return "ppermute";
    case OpCode::kAllToAll:
      return "all_to_all";
    case OpCode::kAxisIndex:
      return "axis_index";
  }
  return "?";
}

bool IsElementwise(OpCode op) {
  return op >= OpCode::kNeg && op <= OpCode::kSelect;
}

bool IsCollective(OpCode op) {
  return op >= OpCode::kPsum && op <= OpCode::kAxisIndex;
}

}  // namespace program
}  // namespace shardmap
