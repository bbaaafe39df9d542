// Reductions (sum, mean, max, min, argmax), matmul, and the composites
// softmax and logsumexp, lowered to primitive instructions.
#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "program/checker_internal.h"

namespace shardmap {
namespace program {
namespace checker_internal {

absl::StatusOr<std::vector<int64_t>> Checker::ReductionAxes(
    absl::string_view fn, const Arg& axis, int64_t rank) const {
  std::vector<int64_t> out;
  if (!axis.given || axis.value.kind == Value::kNone) {
    for (int64_t k = 0; k < rank; ++k) out.push_back(k);
    return out;
  }
  auto axes = StaticInts(fn, "axis", axis);
  if (!axes.ok()) return axes.status();
  for (int64_t a : *axes) {
    auto n = NormalizeAxis(fn, axis.pos, a, rank);
    if (!n.ok()) return n.status();
    if (std::find(out.begin(), out.end(), *n) != out.end()) {
      return Error(axis.pos, absl::StrCat(fn, ": duplicate value in 'axis'"));
    }
    out.push_back(*n);
  }
  std::sort(out.begin(), out.end());
  return out;
}

absl::StatusOr<Value> Checker::ReduceAxes(OpCode op, SourcePos pos,
                                          const Value& x,
                                          std::vector<int64_t> axes,
                                          bool keepdims, ElemType result,
                                          bool weak) {
  const ValueType& t = TypeOf(x);
  Instr in;
  in.op = op;
  in.operands = {x.instr};
  in.attrs.axes = axes;
  in.attrs.keepdims = keepdims;
  in.type.elem = result;
  in.type.vma = t.vma;
  in.pos = pos;
  for (size_t k = 0; k < t.shape.size(); ++k) {
    const bool reduced = std::find(axes.begin(), axes.end(),
                                   static_cast<int64_t>(k)) != axes.end();
    if (reduced && t.shape[k] == 0 &&
        (op == OpCode::kReduceMax || op == OpCode::kReduceMin ||
         op == OpCode::kArgMax)) {
      return Error(pos,
                   absl::StrCat(OpName(op), ": zero-size array ",
                                TypeString(t.elem, t.shape),
                                " has no maximum or minimum along axis ", k));
    }
    if (!reduced) {
      in.type.shape.push_back(t.shape[k]);
    } else if (keepdims) {
      in.type.shape.push_back(1);
    }
  }
  auto n = Elements(pos, t.shape);
  if (!n.ok()) return n.status();
  in.flops = *n;
  auto i = Emit(in);
  if (!i.ok()) return i.status();
  return ArrayValue(*i, weak);
}

absl::StatusOr<Value> Checker::Reduce(const std::string& fn, SourcePos pos,
                                      const Value& x0, const Arg& axis,
                                      bool keepdims) {
  auto d = DTypeOf(pos, x0);
  if (!d.ok()) return d.status();
  auto x = AsArray(pos, x0, *d);
  if (!x.ok()) return x.status();
  const int64_t rank = static_cast<int64_t>(TypeOf(*x).shape.size());
  if (fn == "argmax") {
    if (!axis.given || axis.value.kind == Value::kNone) {
      // Over the flattened array; keepdims keeps every dimension as 1.
      auto n = Elements(pos, TypeOf(*x).shape);
      if (!n.ok()) return n.status();
      auto flat = ReshapeTo(pos, *x, {*n});
      if (!flat.ok()) return flat.status();
      auto r = ReduceAxes(OpCode::kArgMax, pos, *flat, {0}, false,
                          ElemType::kInt32, false);
      if (!r.ok() || !keepdims) return r;
      return ReshapeTo(pos, *r, std::vector<int64_t>(rank, 1));
    }
    if (axis.value.kind != Value::kInt) {
      return Error(axis.pos, "argmax: axis must be an int or None");
    }
    auto a = NormalizeAxis(fn, axis.pos, axis.value.i, rank);
    if (!a.ok()) return a.status();
    return ReduceAxes(OpCode::kArgMax, pos, *x, {*a}, keepdims,
                      ElemType::kInt32, false);
  }
  auto axes = ReductionAxes(fn, axis, rank);
  if (!axes.ok()) return axes.status();
  DType t = *d;
  OpCode op = OpCode::kReduceSum;
  if (fn == "sum") {
    // Booleans sum as int32 (JAX's default int).
    if (t.elem == ElemType::kBool) t = {ElemType::kInt32, false};
  } else if (fn == "mean") {
    t = Inexact(t);  // the mean of ints is floating, as true division
    op = OpCode::kMean;
  } else {
    op = fn == "max" ? OpCode::kReduceMax : OpCode::kReduceMin;
  }
  auto xc = AsArray(pos, *x, t);
  if (!xc.ok()) return xc.status();
  return ReduceAxes(op, pos, *xc, *axes, keepdims, t.elem, t.weak);
}

absl::StatusOr<Value> Checker::MatMul(SourcePos pos, const Value& a,
                                      const Value& b) {
  for (const Value* v : {&a, &b}) {
    if (v->kind != Value::kArray || TypeOf(*v).shape.empty()) {
      return Error(pos, absl::StrCat("matmul: operand ", v == &a ? 0 : 1,
                                     " is ", Describe(*v),
                                     "; matmul needs arrays of rank >= 1 "
                                     "(use * to scale)"));
    }
  }
  const DType t = Promote({TypeOf(a).elem, a.weak}, {TypeOf(b).elem, b.weak});
  if (t.elem == ElemType::kBool) {
    return Error(pos,
                 "matmul of bool arrays is not supported; use "
                 ".astype(...)");
  }
  std::vector<int64_t> sa = TypeOf(a).shape, sb = TypeOf(b).shape;
  const bool a_vec = sa.size() == 1, b_vec = sb.size() == 1;
  if (a_vec) sa.insert(sa.begin(), 1);
  if (b_vec) sb.push_back(1);
  const int64_t m = sa[sa.size() - 2], k = sa.back();
  const int64_t k2 = sb[sb.size() - 2], n = sb.back();
  const std::string shown =
      absl::StrCat(TypeString(TypeOf(a).elem, TypeOf(a).shape), " @ ",
                   TypeString(TypeOf(b).elem, TypeOf(b).shape));
  if (k != k2) {
    return Error(pos, absl::StrCat("matmul: contracting dimensions differ: ",
                                   shown, " (", k, " vs ", k2, ")"));
  }
  std::vector<int64_t> ba(sa.begin(), sa.end() - 2),
      bb(sb.begin(), sb.end() - 2);
  std::vector<int64_t> batch = ba.size() >= bb.size() ? ba : bb;
  const std::vector<int64_t>& other = ba.size() >= bb.size() ? bb : ba;
  for (size_t j = 0; j < other.size(); ++j) {
    int64_t& o = batch[batch.size() - other.size() + j];
    if (o == other[j] || other[j] == 1) continue;
    if (o != 1) {
      return Error(pos, absl::StrCat("matmul: batch dimensions do not "
                                     "broadcast: ",
                                     shown));
    }
    o = other[j];
  }
  auto xa = AsArray(pos, a, t);
  if (!xa.ok()) return xa.status();
  auto xb = AsArray(pos, b, t);
  if (!xb.ok()) return xb.status();
  Instr in;
  in.op = OpCode::kMatMul;
  in.operands = {xa->instr, xb->instr};
  in.type.elem = t.elem;
  in.type.shape = batch;
  if (!a_vec) in.type.shape.push_back(m);
  if (!b_vec) in.type.shape.push_back(n);
  in.type.vma = VmaUnion({&a, &b});
  in.pos = pos;
  auto batch_n = Elements(pos, batch);
  if (!batch_n.ok()) return batch_n.status();
  auto out_n = Elements(pos, in.type.shape);
  if (!out_n.ok()) return out_n.status();
  // 2*m*n*k*batch, saturating (the peak-memory limit refuses anything
  // near that size anyway).
  const double flops = 2.0 * m * n * k * static_cast<double>(*batch_n);
  in.flops = flops > 9e18 ? INT64_MAX : static_cast<int64_t>(flops);
  auto i = Emit(in);
  if (!i.ok()) return i.status();
  return ArrayValue(*i, t.weak);
}

absl::StatusOr<Value> Checker::Softmax(SourcePos pos, const Value& x0,
                                       const Arg& axis) {
  auto d = DTypeOf(pos, x0);
  if (!d.ok()) return d.status();
  const DType t = Inexact(*d);
  auto x = AsArray(pos, x0, t);
  if (!x.ok()) return x.status();
  auto axes = ReductionAxes("softmax", axis,
                            static_cast<int64_t>(TypeOf(*x).shape.size()));
  if (!axes.ok()) return axes.status();
  // exp(x - max) / sum(exp(x - max)), over the axes, kept for broadcasting.
  auto m = ReduceAxes(OpCode::kReduceMax, pos, *x, *axes, true, t.elem, t.weak);
  if (!m.ok()) return m.status();
  auto shifted = EmitElementwise(OpCode::kSub, pos, {*x, *m}, t.elem, t.weak);
  if (!shifted.ok()) return shifted.status();
  auto e = EmitElementwise(OpCode::kExp, pos, {*shifted}, t.elem, t.weak);
  if (!e.ok()) return e.status();
  auto s = ReduceAxes(OpCode::kReduceSum, pos, *e, *axes, true, t.elem, t.weak);
  if (!s.ok()) return s.status();
  return EmitElementwise(OpCode::kDiv, pos, {*e, *s}, t.elem, t.weak);
}

absl::StatusOr<Value> Checker::LogSumExp(SourcePos pos, const Value& x0,
                                         const Arg& axis, bool keepdims) {
  auto d = DTypeOf(pos, x0);
  if (!d.ok()) return d.status();
  const DType t = Inexact(*d);
  auto x = AsArray(pos, x0, t);
  if (!x.ok()) return x.status();
  auto axes = ReductionAxes("logsumexp", axis,
                            static_cast<int64_t>(TypeOf(*x).shape.size()));
  if (!axes.ok()) return axes.status();
  // m + log(sum(exp(x - m))) with m the maximum where it is finite and 0
  // elsewhere (as jax.nn.logsumexp), so infinities do not give NaN.
  auto m = ReduceAxes(OpCode::kReduceMax, pos, *x, *axes, true, t.elem, t.weak);
  if (!m.ok()) return m.status();
  auto abs_m = EmitElementwise(OpCode::kAbs, pos, {*m}, t.elem, t.weak);
  if (!abs_m.ok()) return abs_m.status();
  auto inf = Constant(pos, {t.elem, false},
                      std::numeric_limits<double>::infinity(), 0, {});
  if (!inf.ok()) return inf.status();
  auto finite =
      EmitElementwise(OpCode::kLt, pos, {*abs_m, *inf}, ElemType::kBool, false);
  if (!finite.ok()) return finite.status();
  auto zero = Constant(pos, {t.elem, false}, 0, 0, {});
  if (!zero.ok()) return zero.status();
  auto safe = EmitElementwise(OpCode::kSelect, pos, {*finite, *m, *zero},
                              t.elem, t.weak);
  if (!safe.ok()) return safe.status();
  auto shifted =
      EmitElementwise(OpCode::kSub, pos, {*x, *safe}, t.elem, t.weak);
  if (!shifted.ok()) return shifted.status();
  auto e = EmitElementwise(OpCode::kExp, pos, {*shifted}, t.elem, t.weak);
  if (!e.ok()) return e.status();
  auto s =
      ReduceAxes(OpCode::kReduceSum, pos, *e, *axes, keepdims, t.elem, t.weak);
  if (!s.ok()) return s.status();
  auto l = EmitElementwise(OpCode::kLog, pos, {*s}, t.elem, t.weak);
  if (!l.ok()) return l.status();
  Value offset = *safe;
  if (!keepdims) {
    auto r = ReshapeTo(pos, *safe, TypeOf(*s).shape);
    if (!r.ok()) return r.status();
    offset = *r;
  }
  return EmitElementwise(OpCode::kAdd, pos, {*l, offset}, t.elem, t.weak);
}

}  // namespace checker_internal
}  // namespace program
}  // namespace shardmap
