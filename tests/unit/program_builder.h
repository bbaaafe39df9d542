// Test helper: builds checked programs (program/ir.h) by hand, inferring
// each instruction's type the way the checker would (numpy broadcasting,
// reduced and matmul shapes), so evaluator tests need no parser.
#ifndef SHARDMAP_TESTS_UNIT_PROGRAM_BUILDER_H_
#define SHARDMAP_TESTS_UNIT_PROGRAM_BUILDER_H_

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "program/ir.h"

namespace shardmap {
namespace program {

class ProgramBuilder {
 public:
  int Param(ElemType elem, Shape shape) {
    ValueType t{elem, std::move(shape), {}};
    Attrs a;
    a.index = static_cast<int64_t>(p_.params.size());
    p_.params.push_back(t);
    return Emit(OpCode::kParam, {}, t, a);
  }
  int Emit(OpCode op, std::vector<int> operands, ValueType type,
           Attrs attrs = {}) {
    Instr in;
    in.op = op;
    in.operands = std::move(operands);
    in.type = std::move(type);
    in.attrs = std::move(attrs);
    in.pos = {1, static_cast<int>(p_.instrs.size()) + 1};
    p_.instrs.push_back(std::move(in));
    return static_cast<int>(p_.instrs.size()) - 1;
  }
  const ValueType& Type(int v) const { return p_.instrs[v].type; }

  int Constant(ElemType elem, Shape shape, double value) {
    Attrs a;
    a.value = value;
    a.int_value = static_cast<int64_t>(value);
    return Emit(OpCode::kConstant, {}, {elem, std::move(shape), {}}, a);
  }
  int Iota(ElemType elem, int64_t n, double start, double step) {
    Attrs a;
    a.value = start;
    a.step = step;
    return Emit(OpCode::kIota, {}, {elem, {n}, {}}, a);
  }
  // Elementwise: the result broadcasts every operand; comparisons give bool,
  // select takes its elem from the branches, convert from `to`.
  int Elementwise(OpCode op, std::vector<int> xs,
                  ElemType to = ElemType::kFloat32) {
    Shape shape;
    for (int x : xs) shape = Broadcast(shape, Type(x).shape);
    ElemType elem = Type(xs.back()).elem;
    if (op >= OpCode::kEq && op <= OpCode::kGe) elem = ElemType::kBool;
    if (op == OpCode::kConvert) elem = to;
    return Emit(op, std::move(xs), {elem, shape, {}});
  }
  int Unary(OpCode op, int x) { return Elementwise(op, {x}); }
  int Binary(OpCode op, int x, int y) { return Elementwise(op, {x, y}); }
  int Convert(int x, ElemType to) {
    return Elementwise(OpCode::kConvert, {x}, to);
  }
  int Reduce(OpCode op, int x, std::vector<int64_t> axes, bool keepdims,
             ElemType elem) {
    Shape shape;
    const Shape& in = Type(x).shape;
    for (size_t d = 0; d < in.size(); ++d) {
      const bool r = std::count(axes.begin(), axes.end(), d) > 0;
      if (!r) shape.push_back(in[d]);
      if (r && keepdims) shape.push_back(1);
    }
    Attrs a;
    a.axes = std::move(axes);
    a.keepdims = keepdims;
    return Emit(op, {x}, {elem, shape, {}}, a);
  }
  int MatMul(int x, int y) {
    Shape a = Type(x).shape, b = Type(y).shape;
    const bool a1 = a.size() == 1, b1 = b.size() == 1;
    if (a1) a.insert(a.begin(), 1);
    if (b1) b.push_back(1);
    Shape shape =
        Broadcast(Shape(a.begin(), a.end() - 2), Shape(b.begin(), b.end() - 2));
    if (!a1) shape.push_back(a[a.size() - 2]);
    if (!b1) shape.push_back(b.back());
    return Emit(OpCode::kMatMul, {x, y}, {Type(x).elem, shape, {}});
  }
  int Transpose(int x, std::vector<int64_t> perm) {
    Shape shape;
    for (int64_t p : perm) shape.push_back(Type(x).shape[p]);
    Attrs a;
    a.perm = std::move(perm);
    return Emit(OpCode::kTranspose, {x}, {Type(x).elem, shape, {}}, a);
  }
  int Reshape(int x, Shape shape) {
    return Emit(OpCode::kReshape, {x}, {Type(x).elem, std::move(shape), {}});
  }
  int BroadcastTo(int x, Shape shape) {
    return Emit(OpCode::kBroadcast, {x}, {Type(x).elem, std::move(shape), {}});
  }
  int Slice(int x, std::vector<int64_t> starts, std::vector<int64_t> limits,
            std::vector<int64_t> strides) {
    Shape shape;
    for (size_t d = 0; d < starts.size(); ++d) {
      shape.push_back(limits[d] > starts[d]
                          ? (limits[d] - starts[d] - 1) / strides[d] + 1
                          : 0);
    }
    Attrs a;
    a.starts = std::move(starts);
    a.limits = std::move(limits);
    a.strides = std::move(strides);
    return Emit(OpCode::kSlice, {x}, {Type(x).elem, shape, {}}, a);
  }
  int Concatenate(std::vector<int> xs, int64_t axis) {
    Shape shape = Type(xs[0]).shape;
    shape[axis] = 0;
    for (int x : xs) shape[axis] += Type(x).shape[axis];
    Attrs a;
    a.axis = axis;
    return Emit(OpCode::kConcatenate, xs, {Type(xs[0]).elem, shape, {}}, a);
  }
  // A collective whose result type the caller gives.
  int Collective(OpCode op, std::vector<int> xs, ValueType type, Attrs a) {
    return Emit(op, std::move(xs), std::move(type), std::move(a));
  }

  void Output(int v) { p_.outputs.push_back(v); }
  Program Build(int output) {
    Output(output);
    return p_;
  }
  Program Build() const { return p_; }

  static Shape Broadcast(const Shape& x, const Shape& y) {
    Shape out(std::max(x.size(), y.size()), 1);
    for (size_t i = 0; i < out.size(); ++i) {
      const size_t o = out.size() - 1 - i;
      const int64_t a = i < x.size() ? x[x.size() - 1 - i] : 1;
      const int64_t b = i < y.size() ? y[y.size() - 1 - i] : 1;
      out[o] = a == 1 ? b : a;
    }
    return out;
  }

 private:
  Program p_;
};

}  // namespace program
}  // namespace shardmap

#endif  // SHARDMAP_TESTS_UNIT_PROGRAM_BUILDER_H_
