// Elementwise rules: JAX's type promotion (program/types.h), numpy
// broadcasting, folding of Python scalars, and the unary and binary ops.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "program/checker_internal.h"

namespace shardmap {
namespace program {
namespace checker_internal {
namespace {

bool IsPyScalar(const Value& v) {
  return v.kind == Value::kInt || v.kind == Value::kFloat ||
         v.kind == Value::kBool;
}

const std::map<std::string, OpCode>& BinaryOps() {
  static const auto* ops =
      new std::map<std::string, OpCode>{{"add", OpCode::kAdd},
                                        {"subtract", OpCode::kSub},
                                        {"multiply", OpCode::kMul},
                                        {"divide", OpCode::kDiv},
                                        {"floor_divide", OpCode::kFloorDiv},
                                        {"mod", OpCode::kMod},
                                        {"power", OpCode::kPow},
                                        {"maximum", OpCode::kMax},
                                        {"minimum", OpCode::kMin},
                                        {"equal", OpCode::kEq},
                                        {"not_equal", OpCode::kNe},
                                        {"less", OpCode::kLt},
                                        {"less_equal", OpCode::kLe},
                                        {"greater", OpCode::kGt},
                                        {"greater_equal", OpCode::kGe},
                                        {"bitwise_and", OpCode::kAnd},
                                        {"bitwise_or", OpCode::kOr}};
  return *ops;
}

bool IsComparison(OpCode op) {
  return op == OpCode::kEq || op == OpCode::kNe || op == OpCode::kLt ||
         op == OpCode::kLe || op == OpCode::kGt || op == OpCode::kGe;
}

std::string NotAccepted(absl::string_view op, ElemType t) {
  return absl::StrCat(op, " does not accept dtype ", ElemTypeName(t),
                      ". Accepted dtypes are subtypes of integer, bool.");
}

}  // namespace

absl::StatusOr<DType> Checker::DTypeOf(SourcePos pos, const Value& v) const {
  switch (v.kind) {
    case Value::kArray:
      return DType{TypeOf(v).elem, v.weak};
    case Value::kInt:
      return DType{ElemType::kInt32, true};
    case Value::kFloat:
      return DType{ElemType::kFloat32, true};
    case Value::kBool:
      return DType{ElemType::kBool, false};
    default:
      return Error(pos, absl::StrCat("expected an array or a number, got ",
                                     Describe(v)));
  }
}

absl::StatusOr<Value> Checker::Constant(SourcePos pos, DType t, double value,
                                        int64_t int_value,
                                        const std::vector<int64_t>& shape) {
  Instr in;
  in.op = OpCode::kConstant;
  in.type.elem = t.elem;
  in.type.shape = shape;
  in.pos = pos;
  if (IsFloating(t.elem)) {
    in.attrs.value = value;
  } else {
    if (t.elem == ElemType::kBool) int_value = int_value != 0;
    if (t.elem == ElemType::kInt32 &&
        (int_value < INT32_MIN || int_value > INT32_MAX)) {
      return Error(pos, absl::StrCat("Python int ", int_value,
                                     " too large to convert to int32"));
    }
    in.attrs.int_value = int_value;
    in.attrs.value = static_cast<double>(int_value);
  }
  auto i = Emit(in);
  if (!i.ok()) return i.status();
  return ArrayValue(*i, t.weak);
}

absl::StatusOr<Value> Checker::AsArray(SourcePos pos, const Value& v, DType t) {
  if (v.kind == Value::kArray) {
    auto c = Convert(pos, v, t.elem);
    if (!c.ok()) return c;
    c->weak = t.weak;
    return c;
  }
  if (v.kind == Value::kFloat) {
    const double d = v.f;
    int64_t i = 0;
    if (!IsFloating(t.elem)) {
      if (!(std::fabs(d) < 9.2e18)) {
        return Error(pos, absl::StrCat("cannot convert ", d, " to ",
                                       ElemTypeName(t.elem)));
      }
      i = static_cast<int64_t>(d);
    }
    return Constant(pos, t, d, i, {});
  }
  if (v.kind == Value::kInt || v.kind == Value::kBool) {
    return Constant(pos, t, static_cast<double>(v.i), v.i, {});
  }
  return Error(
      pos, absl::StrCat("expected an array or a number, got ", Describe(v)));
}

absl::StatusOr<Value> Checker::Convert(SourcePos pos, const Value& v,
                                       ElemType t) {
  if (TypeOf(v).elem == t) return v;
  Instr in;
  in.op = OpCode::kConvert;
  in.operands = {v.instr};
  in.type = TypeOf(v);
  in.type.elem = t;
  in.pos = pos;
  auto n = Elements(pos, in.type.shape);
  if (!n.ok()) return n.status();
  in.flops = *n;
  auto i = Emit(in);
  if (!i.ok()) return i.status();
  return ArrayValue(*i, false);
}

absl::StatusOr<std::vector<int64_t>> Checker::BroadcastShapes(
    absl::string_view fn, SourcePos pos,
    const std::vector<const Value*>& vs) const {
  std::vector<int64_t> out;
  std::vector<std::string> shown;
  bool ok = true;
  for (const Value* v : vs) {
    if (v->kind != Value::kArray) continue;
    const ValueType& t = TypeOf(*v);
    shown.push_back(TypeString(t.elem, t.shape));
    const std::vector<int64_t>& s = t.shape;
    if (s.size() > out.size())
      out.insert(out.begin(), s.size() - out.size(), 1);
    const size_t off = out.size() - s.size();
    for (size_t k = 0; k < s.size(); ++k) {
      int64_t& o = out[off + k];
      if (o == s[k] || s[k] == 1) continue;
      if (o == 1) {
        o = s[k];
      } else {
        ok = false;
      }
    }
  }
  if (!ok) {
    return Error(pos, absl::StrCat(fn,
                                   ": incompatible shapes for "
                                   "broadcasting: ",
                                   absl::StrJoin(shown, " and ")));
  }
  return out;
}

std::set<std::string> Checker::VmaUnion(
    const std::vector<const Value*>& vs) const {
  std::set<std::string> out;
  for (const Value* v : vs) {
    if (v->kind != Value::kArray) continue;
    out.insert(TypeOf(*v).vma.begin(), TypeOf(*v).vma.end());
  }
  return out;
}

absl::StatusOr<Value> Checker::EmitElementwise(
    OpCode op, SourcePos pos, const std::vector<Value>& operands,
    ElemType result, bool weak) {
  std::vector<const Value*> ptrs;
  for (const Value& v : operands) ptrs.push_back(&v);
  auto shape = BroadcastShapes(OpName(op), pos, ptrs);
  if (!shape.ok()) return shape.status();
  Instr in;
  in.op = op;
  for (const Value& v : operands) in.operands.push_back(v.instr);
  in.type.elem = result;
  in.type.shape = *shape;
  in.type.vma = VmaUnion(ptrs);
  in.pos = pos;
  auto n = Elements(pos, in.type.shape);
  if (!n.ok()) return n.status();
  in.flops = *n;
  auto i = Emit(in);
  if (!i.ok()) return i.status();
  return ArrayValue(*i, weak);
}

absl::StatusOr<Value> Checker::BinaryOp(const std::string& fn, SourcePos pos,
                                        const Value& a, const Value& b) {
  auto it = BinaryOps().find(fn);
  if (it == BinaryOps().end()) {
    return Error(pos, absl::StrCat("unknown operation ", fn));
  }
  OpCode op = it->second;
  if (IsPyScalar(a) && IsPyScalar(b) && op != OpCode::kMax &&
      op != OpCode::kMin) {
    return FoldBinary(op, pos, a, b);
  }
  auto da = DTypeOf(pos, a);
  if (!da.ok()) return da.status();
  auto db = DTypeOf(pos, b);
  if (!db.ok()) return db.status();
  // Shapes first, so a mismatch is reported before any conversion.
  if (auto s = BroadcastShapes(fn, pos, {&a, &b}); !s.ok()) return s.status();
  DType t = Promote(*da, *db);
  if (t.elem == ElemType::kBool) {
    // As jnp: + and * of booleans are logical or/and; - is refused; the
    // numeric ops compute in int32.
    if (op == OpCode::kAdd) op = OpCode::kOr;
    if (op == OpCode::kMul) op = OpCode::kAnd;
    if (op == OpCode::kSub) {
      return Error(pos,
                   "subtract does not accept dtype bool; use ^, | or "
                   ".astype(...)");
    }
    if (op == OpCode::kFloorDiv || op == OpCode::kMod || op == OpCode::kPow) {
      t = {ElemType::kInt32, false};
    }
  }
  if (op == OpCode::kDiv) t = Inexact(t);  // true division
  if ((op == OpCode::kAnd || op == OpCode::kOr) && IsFloating(t.elem)) {
    return Error(pos, NotAccepted(fn, t.elem));
  }
  auto xa = AsArray(pos, a, t);
  if (!xa.ok()) return xa.status();
  auto xb = AsArray(pos, b, t);
  if (!xb.ok()) return xb.status();
  if (IsComparison(op)) {
    return EmitElementwise(op, pos, {*xa, *xb}, ElemType::kBool, false);
  }
  return EmitElementwise(op, pos, {*xa, *xb}, t.elem, t.weak);
}

absl::StatusOr<Value> Checker::UnaryOp(const std::string& fn, SourcePos pos,
                                       const Value& a) {
  if (fn == "positive") {
    if (auto t = DTypeOf(pos, a); !t.ok()) return t.status();
    return a;
  }
  if (IsPyScalar(a) && (fn == "negative" || fn == "invert")) {
    Value zero;
    zero.kind = Value::kInt;
    if (fn == "negative") return BinaryOp("subtract", pos, zero, a);
    if (a.kind == Value::kFloat) {
      return Error(pos, "bad operand type for unary ~: 'float'");
    }
    Value r;
    r.kind = Value::kInt;
    r.i = ~a.i;
    return r;
  }
  auto d = DTypeOf(pos, a);
  if (!d.ok()) return d.status();
  DType t = *d;
  OpCode op;
  if (fn == "negative") {
    if (t.elem == ElemType::kBool) {
      return Error(pos, "negative does not accept dtype bool");
    }
    op = OpCode::kNeg;
  } else if (fn == "invert") {
    if (IsFloating(t.elem)) return Error(pos, NotAccepted(fn, t.elem));
    op = OpCode::kNot;
  } else if (fn == "abs") {
    if (t.elem == ElemType::kBool) return a;  // as jnp.abs
    op = OpCode::kAbs;
  } else if (fn == "relu") {
    // relu(x) is maximum(x, 0): a bool operand meets the weak int 0.
    if (t.elem == ElemType::kBool) t = {ElemType::kInt32, true};
    op = OpCode::kRelu;
  } else {
    static const std::map<std::string, OpCode> kFloat = {
        {"exp", OpCode::kExp},     {"log", OpCode::kLog},
        {"log1p", OpCode::kLog1p}, {"sqrt", OpCode::kSqrt},
        {"tanh", OpCode::kTanh},   {"sin", OpCode::kSin},
        {"cos", OpCode::kCos},     {"sigmoid", OpCode::kSigmoid}};
    auto it = kFloat.find(fn);
    if (it == kFloat.end()) {
      return Error(pos, absl::StrCat("unknown operation ", fn));
    }
    op = it->second;
    t = Inexact(t);
  }
  auto x = AsArray(pos, a, t);
  if (!x.ok()) return x.status();
  return EmitElementwise(op, pos, {*x}, t.elem, t.weak);
}

absl::StatusOr<Value> Checker::Where(SourcePos pos, const Value& c,
                                     const Value& a, const Value& b) {
  auto dc = DTypeOf(pos, c);
  if (!dc.ok()) return dc.status();
  auto da = DTypeOf(pos, a);
  if (!da.ok()) return da.status();
  auto db = DTypeOf(pos, b);
  if (!db.ok()) return db.status();
  if (auto s = BroadcastShapes("where", pos, {&c, &a, &b}); !s.ok()) {
    return s.status();
  }
  auto cond = AsArray(pos, c, *dc);
  if (!cond.ok()) return cond.status();
  if (dc->elem != ElemType::kBool) {
    // A numeric condition means `condition != 0`, as jnp.where.
    Value zero;
    zero.kind = Value::kInt;
    cond = BinaryOp("not_equal", pos, *cond, zero);
    if (!cond.ok()) return cond.status();
  }
  const DType t = Promote(*da, *db);
  auto xa = AsArray(pos, a, t);
  if (!xa.ok()) return xa.status();
  auto xb = AsArray(pos, b, t);
  if (!xb.ok()) return xb.status();
  return EmitElementwise(OpCode::kSelect, pos, {*cond, *xa, *xb}, t.elem,
                         t.weak);
}

absl::StatusOr<Value> Checker::AsType(SourcePos pos, const Value& x,
                                      ElemType t) {
  auto r = AsArray(pos, x, DType{t, false});
  if (!r.ok()) return r;
  r->weak = false;
  return r;
}

}  // namespace checker_internal
}  // namespace program
}  // namespace shardmap
