#include "program/eval_validate.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "program/eval_value.h"
#include "program/types.h"

namespace shardmap {
namespace program {
namespace {

constexpr int64_t kMaxBytes = int64_t{1} << 60;

bool ShapeOk(const Shape& s) {
  unsigned __int128 n = 8;
  for (int64_t d : s) {
    if (d < 0) return false;
    n *= static_cast<uint64_t>(std::max<int64_t>(d, 1));
    if (n > static_cast<unsigned __int128>(kMaxBytes)) return false;
  }
  return true;
}

bool Broadcasts(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  const size_t off = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i) {
    if (from[i] != 1 && from[i] != to[off + i]) return false;
  }
  return true;
}

bool IsFloatOnly(OpCode op) {
  switch (op) {
    case OpCode::kExp:
    case OpCode::kLog:
    case OpCode::kLog1p:
    case OpCode::kSqrt:
    case OpCode::kTanh:
    case OpCode::kSin:
    case OpCode::kCos:
    case OpCode::kSigmoid:
    case OpCode::kDiv:
      return true;
    default:
      return false;
  }
}

class Validator {
 public:
  explicit Validator(const Program& p) : p_(p) {}

  absl::Status Run() {
    for (size_t k = 0; k < p_.params.size(); ++k) {
      if (!ShapeOk(p_.params[k].shape)) {
        return absl::InvalidArgumentError(
            absl::StrCat("malformed program: parameter ", k, " has shape ",
                         ShapeTuple(p_.params[k].shape)));
      }
    }
    for (i_ = 0; i_ < static_cast<int>(p_.instrs.size()); ++i_) {
      if (std::string e = Check(); !e.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("malformed program: ", Where(p_, i_), ": ", e));
      }
    }
    for (int o : p_.outputs) {
      if (o < 0 || o >= static_cast<int>(p_.instrs.size())) {
        return absl::InvalidArgumentError(
            absl::StrCat("malformed program: output names instruction ", o,
                         " of ", p_.instrs.size()));
      }
    }
    return absl::OkStatus();
  }

 private:
  const ValueType& Op(int k) const {
    return p_.instrs[p_.instrs[i_].operands[k]].type;
  }

  std::string Check() const {
    const Instr& in = p_.instrs[i_];
    for (int o : in.operands) {
      if (o < 0 || o >= i_)
        return absl::StrCat("operand ", o, " is not an earlier instruction");
    }
    if (!ShapeOk(in.type.shape)) {
      return absl::StrCat("shape ", ShapeTuple(in.type.shape),
                          " is invalid or too large");
    }
    const size_t arity = in.operands.size();
    auto want = [&](size_t n) {
      return arity == n ? ""
                        : absl::StrCat("takes ", n, " operands, has ", arity);
    };
    const ElemType elem = in.type.elem;
    const Shape& shape = in.type.shape;
    if (in.op == OpCode::kParam) {
      if (arity != 0) return want(0);
      if (in.attrs.index < 0 ||
          in.attrs.index >= static_cast<int64_t>(p_.params.size())) {
        return absl::StrCat("parameter index ", in.attrs.index,
                            " out of range");
      }
      const ValueType& param = p_.params[in.attrs.index];
      if (param.elem != elem || param.shape != shape)
        return "type differs from its parameter's";
      return "";
    }
    if (in.op == OpCode::kConstant) return want(0);
    if (in.op == OpCode::kIota) {
      if (arity != 0) return want(0);
      if (elem == ElemType::kBool) return "arange cannot be bool";
      return shape.size() == 1 ? "" : "arange must be 1-D";
    }
    if (in.op == OpCode::kAxisIndex) {
      if (arity != 0) return want(0);
      return elem == ElemType::kInt32 && shape.empty()
                 ? ""
                 : "axis_index gives an int32 scalar";
    }
    if (in.op == OpCode::kConcatenate) {
      if (arity == 0) return "concatenate needs operands";
    } else if (in.op == OpCode::kSelect) {
      if (arity != 3) return want(3);
    } else if (in.op == OpCode::kMatMul ||
               (IsElementwise(in.op) && in.op >= OpCode::kAdd)) {
      if (arity != 2) return want(2);
    } else if (arity != 1) {
      return want(1);
    }
    if (IsElementwise(in.op)) return CheckElementwise(in);
    if (IsCollective(in.op)) {
      if ((in.op == OpCode::kPsum || in.op == OpCode::kPmean) &&
          Op(0).elem == ElemType::kBool) {
        return "cannot sum bool";
      }
      return "";
    }
    if (in.op == OpCode::kMatMul) return CheckMatMul(in);
    if (in.op >= OpCode::kReduceSum && in.op <= OpCode::kArgMax)
      return CheckReduce(in);
    if (in.op == OpCode::kConcatenate) return CheckConcatenate(in);
    const ValueType& x = Op(0);
    if (x.elem != elem) return "operand elem differs from the result's";
    switch (in.op) {
      case OpCode::kTranspose: {
        std::vector<int64_t> sorted = in.attrs.perm;
        std::sort(sorted.begin(), sorted.end());
        for (size_t d = 0; d < sorted.size(); ++d) {
          if (sorted[d] != static_cast<int64_t>(d))
            return "perm is not a permutation";
        }
        if (sorted.size() != x.shape.size() || shape.size() != x.shape.size())
          return "perm length differs from the rank";
        for (size_t d = 0; d < shape.size(); ++d) {
          if (shape[d] != x.shape[in.attrs.perm[d]])
            return "result shape is not the permuted shape";
        }
        return "";
      }
      case OpCode::kReshape:
        return NumElements(shape) == NumElements(x.shape)
                   ? ""
                   : "reshape changes the element count";
      case OpCode::kBroadcast:
        return Broadcasts(x.shape, shape)
                   ? ""
                   : "operand does not broadcast to the result";
      case OpCode::kSlice:
        return CheckSlice(in, x);
      default:
        return absl::StrCat("unknown op ", static_cast<int>(in.op));
    }
  }

  std::string CheckElementwise(const Instr& in) const {
    const ElemType elem = in.type.elem;
    for (size_t k = 0; k < in.operands.size(); ++k) {
      if (!Broadcasts(Op(k).shape, in.type.shape)) {
        return absl::StrCat("operand ", k, " of shape ",
                            ShapeTuple(Op(k).shape), " does not broadcast to ",
                            ShapeTuple(in.type.shape));
      }
    }
    if (in.op == OpCode::kConvert) return "";
    if (in.op == OpCode::kSelect) {
      if (Op(0).elem != ElemType::kBool) return "condition is not bool";
      return Op(1).elem == elem && Op(2).elem == elem
                 ? ""
                 : "branches differ from the result's elem";
    }
    const ElemType x = Op(0).elem;
    if (in.operands.size() == 2 && Op(1).elem != x)
      return "operands differ in elem";
    const bool comparison = in.op >= OpCode::kEq && in.op <= OpCode::kGe;
    if (comparison)
      return elem == ElemType::kBool ? "" : "comparisons give bool";
    if (elem != x) return "result elem differs from the operands'";
    if (IsFloatOnly(in.op) && !IsFloating(x))
      return absl::StrCat("takes floats, not ", ElemTypeName(x));
    const bool logical =
        in.op == OpCode::kNot || in.op == OpCode::kAnd || in.op == OpCode::kOr;
    if (logical && IsFloating(x)) return "takes bool or integers";
    const bool bool_ok = logical || in.op == OpCode::kAdd ||
                         in.op == OpCode::kMul || in.op == OpCode::kMax ||
                         in.op == OpCode::kMin;
    if (x == ElemType::kBool && !bool_ok) return "does not take bool";
    return "";
  }

  std::string CheckReduce(const Instr& in) const {
    const ValueType& x = Op(0);
    const std::vector<int64_t>& axes = in.attrs.axes;
    const int64_t rank = static_cast<int64_t>(x.shape.size());
    std::vector<bool> reduced(rank, false);
    for (size_t k = 0; k < axes.size(); ++k) {
      if (axes[k] < 0 || axes[k] >= rank || (k > 0 && axes[k] <= axes[k - 1])) {
        return absl::StrCat("axes (", absl::StrJoin(axes, ", "),
                            ") are not sorted, distinct and below the rank ",
                            rank);
      }
      reduced[axes[k]] = true;
    }
    Shape want;
    bool empty_axis = false;
    for (int64_t d = 0; d < rank; ++d) {
      if (reduced[d]) {
        empty_axis = empty_axis || x.shape[d] == 0;
        if (in.attrs.keepdims) want.push_back(1);
      } else {
        want.push_back(x.shape[d]);
      }
    }
    if (want != in.type.shape) return "result shape is not the reduced shape";
    const ElemType elem = in.type.elem;
    switch (in.op) {
      case OpCode::kReduceSum:
        if (x.elem == ElemType::kBool) return "cannot sum bool";
        return elem == x.elem ? "" : "result elem differs from the operand's";
      case OpCode::kMean:
        return IsFloating(elem) ? "" : "mean gives a float";
      case OpCode::kArgMax:
        if (axes.size() != 1 || elem != ElemType::kInt32)
          return "argmax takes one axis and gives int32";
        break;
      default:
        if (elem != x.elem) return "result elem differs from the operand's";
    }
    if (in.op != OpCode::kReduceSum && in.op != OpCode::kMean && empty_axis &&
        NumElements(want) > 0) {
      return "reduction over an empty axis has no identity";
    }
    return "";
  }

  std::string CheckMatMul(const Instr& in) const {
    Shape a = Op(0).shape, b = Op(1).shape;
    if (Op(0).elem != in.type.elem || Op(1).elem != in.type.elem)
      return "operands differ from the result's elem";
    if (a.empty() || b.empty()) return "operands must have rank 1 or more";
    const bool a1 = a.size() == 1, b1 = b.size() == 1;
    if (a1) a.insert(a.begin(), 1);
    if (b1) b.push_back(1);
    if (a.back() != b[b.size() - 2]) return "contracting dimensions differ";
    const Shape ab(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
    Shape want(std::max(ab.size(), bb.size()), 1);
    for (size_t i = 0; i < want.size(); ++i) {
      const int64_t da =
          i + ab.size() >= want.size() ? ab[i + ab.size() - want.size()] : 1;
      const int64_t db =
          i + bb.size() >= want.size() ? bb[i + bb.size() - want.size()] : 1;
      if (da != db && da != 1 && db != 1)
        return "batch dimensions do not broadcast";
      want[i] = da == 1 ? db : da;
    }
    if (!a1) want.push_back(a[a.size() - 2]);
    if (!b1) want.push_back(b.back());
    return want == in.type.shape ? ""
                                 : "result shape is not numpy's matmul shape";
  }

  std::string CheckConcatenate(const Instr& in) const {
    const Shape& shape = in.type.shape;
    const int64_t axis = in.attrs.axis;
    if (axis < 0 || axis >= static_cast<int64_t>(shape.size()))
      return "axis out of range";
    int64_t total = 0;
    for (size_t k = 0; k < in.operands.size(); ++k) {
      const ValueType& x = Op(k);
      if (x.elem != in.type.elem || x.shape.size() != shape.size())
        return absl::StrCat("operand ", k, " differs in elem or rank");
      for (size_t d = 0; d < shape.size(); ++d) {
        if (static_cast<int64_t>(d) != axis && x.shape[d] != shape[d])
          return absl::StrCat("operand ", k, " differs in shape");
      }
      total += x.shape[axis];
    }
    return total == shape[axis] ? "" : "sizes along the axis do not add up";
  }

  std::string CheckSlice(const Instr& in, const ValueType& x) const {
    const Attrs& a = in.attrs;
    const size_t rank = x.shape.size();
    if (a.starts.size() != rank || a.limits.size() != rank ||
        a.strides.size() != rank || in.type.shape.size() != rank) {
      return "starts, limits and strides must have one entry per dimension";
    }
    for (size_t d = 0; d < rank; ++d) {
      if (a.strides[d] <= 0 || a.starts[d] < 0 || a.limits[d] > x.shape[d] ||
          a.starts[d] > x.shape[d]) {
        return absl::StrCat("bounds of dimension ", d, " out of range");
      }
      const int64_t len =
          a.limits[d] > a.starts[d]
              ? (a.limits[d] - a.starts[d] - 1) / a.strides[d] + 1
              : 0;
      if (len != in.type.shape[d])
        return absl::StrCat("dimension ", d,
                            " of the result is not the slice's length");
    }
    return "";
  }

  const Program& p_;
  int i_ = 0;
};

}  // namespace

absl::Status ValidateProgram(const Program& program) {
  return Validator(program).Run();
}

}  // namespace program
}  // namespace shardmap
