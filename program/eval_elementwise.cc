#include "program/eval_elementwise.h"

#include <Eigen/Core>
#include <type_traits>

#include "program/eval_scalar.h"
#include "program/eval_value.h"

namespace shardmap {
namespace program {
namespace {

template <typename T>
using In = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;
template <typename T>
using Out = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;

template <typename R, typename T, typename F>
void Map1(int64_t n, const T* a, R* o, F f) {
  for (int64_t i = 0; i < n; ++i) o[i] = f(a[i]);
}

template <typename R, typename T, typename F>
void Map2(int64_t n, const T* a, const T* b, R* o, F f) {
  for (int64_t i = 0; i < n; ++i) o[i] = f(a[i], b[i]);
}

// Floating unary ops over Eigen's vectorized functions.
template <typename T>
void UnaryFloat(OpCode op, int64_t n, const T* a, T* o) {
  In<T> x(a, n);
  Out<T> y(o, n);
  switch (op) {
    case OpCode::kNeg:
      y = -x;
      break;
    case OpCode::kAbs:
      y = x.abs();
      break;
    case OpCode::kExp:
      y = x.exp();
      break;
    case OpCode::kLog:
      y = x.log();
      break;
    case OpCode::kLog1p:
      y = x.log1p();
      break;
    case OpCode::kSqrt:
      y = x.sqrt();
      break;
    case OpCode::kTanh:
      y = x.tanh();
      break;
    case OpCode::kSin:
      y = x.sin();
      break;
    case OpCode::kCos:
      y = x.cos();
      break;
    case OpCode::kRelu:
      // max(x, 0) is std::max's x < 0 ? 0 : x in SIMD: NaN passes (as
      // jax.nn.relu), and + 0 turns -0.0 into 0.0. (A select of the scalar
      // 0 compiled to a mispredicted branch per element.)
      y = x.max(T(0)) + T(0);
      break;
    case OpCode::kSigmoid:
      y = x.logistic();
      break;
    default:
      break;
  }
}

template <typename T>
void UnaryInt(OpCode op, bool is_bool, int64_t n, const T* a, T* o) {
  using U = Wrap<T>;
  switch (op) {
    case OpCode::kNeg:
      Map1(n, a, o, [](T v) { return static_cast<T>(U(0) - U(v)); });
      break;
    case OpCode::kAbs:
      Map1(n, a, o,
           [](T v) { return v < 0 ? static_cast<T>(U(0) - U(v)) : v; });
      break;
    case OpCode::kRelu:
      Map1(n, a, o, [](T v) { return v > 0 ? v : T(0); });
      break;
    case OpCode::kNot:
      if (is_bool) {
        Map1(n, a, o, [](T v) { return static_cast<T>(v == 0); });
      } else {
        Map1(n, a, o, [](T v) { return static_cast<T>(~v); });
      }
      break;
    default:
      break;
  }
}

template <typename T>
void Compare(OpCode op, int64_t n, const T* a, const T* b, int32_t* o) {
  switch (op) {
    case OpCode::kEq:
      Map2(n, a, b, o, [](T x, T y) { return int32_t{x == y}; });
      break;
    case OpCode::kNe:
      Map2(n, a, b, o, [](T x, T y) { return int32_t{x != y}; });
      break;
    case OpCode::kLt:
      Map2(n, a, b, o, [](T x, T y) { return int32_t{x < y}; });
      break;
    case OpCode::kLe:
      Map2(n, a, b, o, [](T x, T y) { return int32_t{x <= y}; });
      break;
    case OpCode::kGt:
      Map2(n, a, b, o, [](T x, T y) { return int32_t{x > y}; });
      break;
    case OpCode::kGe:
      Map2(n, a, b, o, [](T x, T y) { return int32_t{x >= y}; });
      break;
    default:
      break;
  }
}

// Arithmetic binary ops: floats through Eigen where it vectorizes,
// integers wrapping; on bool (0/1), add is or and multiply is and (numpy).
template <typename T>
void Arith(OpCode op, bool is_bool, int64_t n, const T* a, const T* b, T* o) {
  using U = Wrap<T>;
  constexpr bool kFloat = std::is_floating_point_v<T>;
  In<T> x(a, n), y(b, n);
  Out<T> z(o, n);
  if (is_bool && op == OpCode::kAdd) op = OpCode::kOr;
  if (is_bool && op == OpCode::kMul) op = OpCode::kAnd;
  switch (op) {
    case OpCode::kAdd:
      if constexpr (kFloat) {
        z = x + y;
      } else {
        Map2(n, a, b, o, [](T p, T q) { return static_cast<T>(U(p) + U(q)); });
      }
      break;
    case OpCode::kSub:
      if constexpr (kFloat) {
        z = x - y;
      } else {
        Map2(n, a, b, o, [](T p, T q) { return static_cast<T>(U(p) - U(q)); });
      }
      break;
    case OpCode::kMul:
      if constexpr (kFloat) {
        z = x * y;
      } else {
        Map2(n, a, b, o, [](T p, T q) { return static_cast<T>(U(p) * U(q)); });
      }
      break;
    case OpCode::kDiv:
      if constexpr (kFloat) z = x / y;
      break;
    case OpCode::kFloorDiv:
      Map2(n, a, b, o, FloorDivElem<T>);
      break;
    case OpCode::kMod:
      Map2(n, a, b, o, ModElem<T>);
      break;
    case OpCode::kPow:
      Map2(n, a, b, o, PowElem<T>);
      break;
    case OpCode::kMax:
      if constexpr (kFloat) {
        z = x.binaryExpr(
            y, Eigen::internal::scalar_max_op<T, T, Eigen::PropagateNaN>());
      } else {
        Map2(n, a, b, o, MaxElem<T>);
      }
      break;
    case OpCode::kMin:
      if constexpr (kFloat) {
        z = x.binaryExpr(
            y, Eigen::internal::scalar_min_op<T, T, Eigen::PropagateNaN>());
      } else {
        Map2(n, a, b, o, MinElem<T>);
      }
      break;
    case OpCode::kAnd:
      if constexpr (!kFloat) Map2(n, a, b, o, [](T p, T q) { return p & q; });
      break;
    case OpCode::kOr:
      if constexpr (!kFloat) Map2(n, a, b, o, [](T p, T q) { return p | q; });
      break;
    default:
      break;
  }
}

template <typename S>
void Convert(ElemType to, int64_t n, const S* a, void* out) {
  if (to == ElemType::kBool) {
    Map1(n, a, static_cast<int32_t*>(out),
         [](S v) { return static_cast<int32_t>(v != 0); });
    return;
  }
  VisitElem(to, [&](auto tag) {
    using D = decltype(tag);
    D* o = static_cast<D*>(out);
    if constexpr (std::is_same_v<S, D>) {
      if (static_cast<const void*>(a) != out) Out<D>(o, n) = In<D>(a, n);
    } else {
      Map1(n, a, o, CastElem<D, S>);
    }
  });
}

bool IsComparison(OpCode op) { return op >= OpCode::kEq && op <= OpCode::kGe; }

}  // namespace

void ApplyElementwise(const Instr& in, const ElemType* operand_elems, int64_t n,
                      const void* const* ins, void* out) {
  const ElemType elem = operand_elems[0];
  const bool is_bool = elem == ElemType::kBool;
  const OpCode op = in.op;
  if (op == OpCode::kConvert) {
    VisitElem(elem, [&](auto tag) {
      using S = decltype(tag);
      Convert<S>(in.type.elem, n, static_cast<const S*>(ins[0]), out);
    });
    return;
  }
  if (op == OpCode::kSelect) {
    const int32_t* c = static_cast<const int32_t*>(ins[0]);
    VisitElem(in.type.elem, [&](auto tag) {
      using T = decltype(tag);
      const T* a = static_cast<const T*>(ins[1]);
      const T* b = static_cast<const T*>(ins[2]);
      T* o = static_cast<T*>(out);
      for (int64_t i = 0; i < n; ++i) o[i] = c[i] != 0 ? a[i] : b[i];
    });
    return;
  }
  VisitElem(elem, [&](auto tag) {
    using T = decltype(tag);
    const T* a = static_cast<const T*>(ins[0]);
    if (op < OpCode::kAdd) {  // unary
      if constexpr (std::is_floating_point_v<T>) {
        UnaryFloat<T>(op, n, a, static_cast<T*>(out));
      } else {
        UnaryInt<T>(op, is_bool, n, a, static_cast<T*>(out));
      }
      return;
    }
    const T* b = static_cast<const T*>(ins[1]);
    if (IsComparison(op)) {
      Compare<T>(op, n, a, b, static_cast<int32_t*>(out));
    } else {
      Arith<T>(op, is_bool, n, a, b, static_cast<T*>(out));
    }
  });
}

}  // namespace program
}  // namespace shardmap
