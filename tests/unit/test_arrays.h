// Deterministic test data shared by the unit tests that run kernels and
// collectives on many devices.
#ifndef SHARDMAP_TESTS_UNIT_TEST_ARRAYS_H_
#define SHARDMAP_TESTS_UNIT_TEST_ARRAYS_H_

#include <cstdint>
#include <type_traits>

#include "core/dtype_dispatch.h"
#include "core/tensor.h"

namespace shardmap {

// splitmix64's finalizer: a well-mixed 64-bit hash of `x`.
inline uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// An array drawn from (seed, element index): floats with inexact partial
// sums (so the summation order shows in the last bits), integers over the
// whole range (so sums wrap).
inline Tensor Input(DType dtype, const Shape& shape, uint64_t seed) {
  Tensor t(dtype, shape);
  VisitDType(dtype, [&](auto zero) {
    using T = decltype(zero);
    T* p = t.data_as<T>();
    for (int64_t i = 0; i < t.num_elements(); ++i) {
      const uint64_t h = Mix(seed * 1000003 + i);
      if constexpr (std::is_floating_point_v<T>) {
        p[i] = static_cast<T>(static_cast<int64_t>(h % 20001) - 10000) / T(7);
      } else {
        p[i] = static_cast<T>(h);
      }
    }
  });
  return t;
}

}  // namespace shardmap

#endif  // SHARDMAP_TESTS_UNIT_TEST_ARRAYS_H_
