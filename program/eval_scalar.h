// Scalar semantics of the evaluator's element types (internal to
// shard_program_eval), numpy's wherever numpy defines them and a safe,
// documented value where numpy warns or the C++ cast would be undefined:
//   - integer + - * and negation wrap around (two's complement), as numpy;
//   - integer // and % by zero give 0 (numpy: 0 with a warning), and
//     INT_MIN // -1 wraps to INT_MIN; signs follow Python (floor);
//   - float // and % follow numpy's divmod (a // 0.0 is a / 0.0, a % 0.0 is
//     NaN);
//   - integer ** negative exponent (numpy raises): 1 ** -n is 1, (-1) ** -n
//     is +-1, anything else 0 (what truncating 1 / x ** n gives, as XLA);
//   - float -> integer truncates toward zero, as astype; NaN gives 0 and
//     values out of range clamp to the integer's range (numpy: undefined);
//   - float64 -> float32 rounds, overflowing to +-inf;
//   - maximum and minimum propagate NaN.
#ifndef SHARDMAP_PROGRAM_EVAL_SCALAR_H_
#define SHARDMAP_PROGRAM_EVAL_SCALAR_H_

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace shardmap {
namespace program {

// Integers compute as their unsigned counterparts: wrap-around defined.
template <typename T>
using Wrap =
    typename std::conditional_t<std::is_integral_v<T>, std::make_unsigned<T>,
                                std::common_type<T>>::type;

// S -> D with the rules above (to bool is handled by the caller: != 0).
template <typename D, typename S>
D CastElem(S x) {
  if constexpr (std::is_floating_point_v<S> && std::is_integral_v<D>) {
    if (std::isnan(x)) return 0;
    // The bounds are exact powers of two in S, so the comparisons are exact.
    constexpr S kLow = static_cast<S>(std::numeric_limits<D>::min());
    constexpr S kHigh = -kLow;  // 2^(bits-1), one past the maximum
    if (x <= kLow) return std::numeric_limits<D>::min();
    if (x >= kHigh) return std::numeric_limits<D>::max();
    return static_cast<D>(x);
  } else if constexpr (std::is_same_v<S, double> && std::is_same_v<D, float>) {
    if (std::isfinite(x) && std::fabs(x) > std::numeric_limits<float>::max()) {
      // Rounds to the largest float when close enough, else overflows.
      const double limit = 3.4028235677973366e38;  // FLT_MAX + half an ulp
      if (std::fabs(x) >= limit) {
        return std::signbit(x) ? -std::numeric_limits<float>::infinity()
                               : std::numeric_limits<float>::infinity();
      }
      return std::signbit(x) ? -std::numeric_limits<float>::max()
                             : std::numeric_limits<float>::max();
    }
    return static_cast<float>(x);
  } else if constexpr (std::is_integral_v<S> && std::is_integral_v<D>) {
    return static_cast<D>(static_cast<std::make_unsigned_t<D>>(x));
  } else {
    return static_cast<D>(x);
  }
}

template <typename T>
T FloorDivElem(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    if (b == 0) return 0;
    if (b == -1) return static_cast<T>(Wrap<T>(0) - static_cast<Wrap<T>>(a));
    T q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
    return q;
  } else {
    if (b == 0) return a / b;
    T mod = std::fmod(a, b);
    T div = (a - mod) / b;
    if (mod != 0) {
      if ((b < 0) != (mod < 0)) div -= 1;
    }
    if (div == 0) return std::copysign(T(0), a / b);
    T floor_div = std::floor(div);
    if (div - floor_div > T(0.5)) floor_div += 1;
    return floor_div;
  }
}

template <typename T>
T ModElem(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    if (b == 0 || b == -1) return 0;
    T r = a % b;
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
  } else {
    if (b == 0) return std::fmod(a, b);
    T mod = std::fmod(a, b);
    if (mod != 0) {
      if ((b < 0) != (mod < 0)) mod += b;
    } else {
      mod = std::copysign(T(0), b);
    }
    return mod;
  }
}

template <typename T>
T PowElem(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    if (b < 0) {
      if (a == 1) return 1;
      if (a == -1) return (b & 1) ? -1 : 1;
      return 0;
    }
    Wrap<T> base = static_cast<Wrap<T>>(a), result = 1;
    for (T e = b; e > 0; e >>= 1) {
      if (e & 1) result *= base;
      base *= base;
    }
    return static_cast<T>(result);
  } else {
    return std::pow(a, b);
  }
}

template <typename T>
T MaxElem(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a)) return a;
    if (std::isnan(b)) return b;
  }
  return a >= b ? a : b;
}

template <typename T>
T MinElem(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a)) return a;
    if (std::isnan(b)) return b;
  }
  return a <= b ? a : b;
}

}  // namespace program
}  // namespace shardmap

#endif  // SHARDMAP_PROGRAM_EVAL_SCALAR_H_
