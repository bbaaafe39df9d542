// Python scalars combine as Python does, at check time: 2 * 3 is the int
// 6, 1 / 2 the float 0.5, comparisons give bools. Integer overflow (Python
// has none) is refused rather than wrapped.
#include <cmath>
#include <optional>

#include "absl/strings/str_cat.h"
#include "program/checker_internal.h"

namespace shardmap {
namespace program {
namespace checker_internal {
namespace {

Value Int(int64_t i) {
  Value v;
  v.kind = Value::kInt;
  v.i = i;
  return v;
}
Value Float(double f) {
  Value v;
  v.kind = Value::kFloat;
  v.f = f;
  return v;
}
Value Bool(bool b) {
  Value v;
  v.kind = Value::kBool;
  v.i = b;
  return v;
}

// Python's floor division and modulo (the sign follows the divisor).
// A comparison of two Python numbers; nullopt for any other op.
template <typename T>
std::optional<bool> Compare(OpCode op, T x, T y) {
  switch (op) {
    case OpCode::kEq:
      return x == y;
    case OpCode::kNe:
      return x != y;
    case OpCode::kLt:
      return x < y;
    case OpCode::kLe:
      return x <= y;
    case OpCode::kGt:
      return x > y;
    case OpCode::kGe:
      return x >= y;
    default:
      return std::nullopt;
  }
}

int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

}  // namespace

absl::StatusOr<Value> Checker::FoldBinary(OpCode op, SourcePos pos,
                                          const Value& a,
                                          const Value& b) const {
  const bool both_bool = a.kind == Value::kBool && b.kind == Value::kBool;
  if (op == OpCode::kAnd || op == OpCode::kOr) {
    if (a.kind == Value::kFloat || b.kind == Value::kFloat) {
      return Error(pos,
                   absl::StrCat("unsupported operand type for ",
                                op == OpCode::kAnd ? "&" : "|", ": 'float'"));
    }
    const int64_t r = op == OpCode::kAnd ? (a.i & b.i) : (a.i | b.i);
    return both_bool ? Bool(r != 0) : Int(r);
  }
  if (a.kind == Value::kFloat || b.kind == Value::kFloat ||
      op == OpCode::kDiv) {
    const double x = a.kind == Value::kFloat ? a.f : static_cast<double>(a.i);
    const double y = b.kind == Value::kFloat ? b.f : static_cast<double>(b.i);
    switch (op) {
      case OpCode::kAdd:
        return Float(x + y);
      case OpCode::kSub:
        return Float(x - y);
      case OpCode::kMul:
        return Float(x * y);
      case OpCode::kDiv:
      case OpCode::kFloorDiv:
      case OpCode::kMod: {
        if (y == 0) return Error(pos, "division by zero");
        if (op == OpCode::kDiv) return Float(x / y);
        const double q = std::floor(x / y);
        return Float(op == OpCode::kFloorDiv ? q : x - q * y);
      }
      case OpCode::kPow:
        if (x == 0 && y < 0)
          return Error(pos,
                       "0.0 cannot be raised to a "
                       "negative power");
        return Float(std::pow(x, y));
      default:
        if (auto c = Compare(op, x, y)) return Bool(*c);
        break;
    }
    return Error(pos, absl::StrCat("unsupported operation ", OpName(op)));
  }
  const int64_t x = a.i, y = b.i;
  int64_t r = 0;
  const auto overflow = [&] {
    return Error(pos, absl::StrCat("integer overflow in ", OpName(op),
                                   " of Python ints ", x, " and ", y,
                                   " (beyond 64 bits)"));
  };
  switch (op) {
    case OpCode::kAdd:
      if (__builtin_add_overflow(x, y, &r)) return overflow();
      return Int(r);
    case OpCode::kSub:
      if (__builtin_sub_overflow(x, y, &r)) return overflow();
      return Int(r);
    case OpCode::kMul:
      if (__builtin_mul_overflow(x, y, &r)) return overflow();
      return Int(r);
    case OpCode::kFloorDiv:
    case OpCode::kMod:
      if (y == 0) return Error(pos, "integer division or modulo by zero");
      if (x == INT64_MIN && y == -1) return overflow();
      r = FloorDiv(x, y);
      return Int(op == OpCode::kFloorDiv ? r : x - r * y);
    case OpCode::kPow: {
      if (y < 0) {
        if (x == 0) return Error(pos, "0 cannot be raised to a negative power");
        return Float(std::pow(static_cast<double>(x), static_cast<double>(y)));
      }
      int64_t result = 1, base = x, e = y;
      while (e > 0) {
        if (e & 1) {
          if (__builtin_mul_overflow(result, base, &result)) return overflow();
        }
        e >>= 1;
        if (e > 0 && __builtin_mul_overflow(base, base, &base)) {
          return overflow();
        }
      }
      return Int(result);
    }
    default:
      if (auto c = Compare(op, x, y)) return Bool(*c);
      break;
  }
  return Error(pos, absl::StrCat("unsupported operation ", OpName(op)));
}

}  // namespace checker_internal
}  // namespace program
}  // namespace shardmap
