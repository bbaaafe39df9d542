#include "worker/collectives/reduce.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "core/dtype_dispatch.h"

namespace shardmap {
namespace {

// Loads and stores through memcpy: the spans carry no alignment promise,
// and the compiler turns these into plain (vector) loads and stores.
template <typename T>
inline T Load(const uint8_t* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

template <typename T>
inline void Store(uint8_t* p, T value) {
  std::memcpy(p, &value, sizeof(T));
}

// One loop per (type, op) so that each is a straight, branch-free loop the
// compiler can vectorize. `combine` must be a pure function of (a, b).
// acc[i] = combine(a[i], in[i]) where a is `first` if kSeparate, else acc
// itself (then `first` is never read, so the pointers never alias).
template <typename T, bool kSeparate, typename Combine>
void ReduceLoop(uint8_t* __restrict acc, const uint8_t* __restrict first,
                const uint8_t* __restrict in, size_t count, Combine combine) {
  for (size_t i = 0; i < count; ++i) {
    const T a = Load<T>((kSeparate ? first : acc) + i * sizeof(T));
    const T b = Load<T>(in + i * sizeof(T));
    Store<T>(acc + i * sizeof(T), combine(a, b));
  }
}

template <typename T, bool kSeparate>
void ReduceTyped(ReduceOp op, uint8_t* acc, const uint8_t* first,
                 const uint8_t* in, size_t count) {
  switch (op) {
    case ReduceOp::kSum:
      // Integers add as their unsigned counterparts: the same low bits as
      // two's complement, with the wrap-around defined.
      ReduceLoop<T, kSeparate>(acc, first, in, count, [](T a, T b) {
        return static_cast<T>(static_cast<Wrapping<T>>(a) +
                              static_cast<Wrapping<T>>(b));
      });
      return;
    case ReduceOp::kMax:
      if constexpr (std::is_floating_point_v<T>) {
        // a != a is NaN; NaN in b falls through to b since a > b is false.
        ReduceLoop<T, kSeparate>(acc, first, in, count, [](T a, T b) {
          return (a > b || a != a) ? a : b;
        });
      } else {
        ReduceLoop<T, kSeparate>(acc, first, in, count,
                                 [](T a, T b) { return a > b ? a : b; });
      }
      return;
    case ReduceOp::kMin:
      if constexpr (std::is_floating_point_v<T>) {
        ReduceLoop<T, kSeparate>(acc, first, in, count, [](T a, T b) {
          return (a < b || a != a) ? a : b;
        });
      } else {
        ReduceLoop<T, kSeparate>(acc, first, in, count,
                                 [](T a, T b) { return a < b ? a : b; });
      }
      return;
  }
}

}  // namespace

void ReduceInto(DType dtype, ReduceOp op, absl::Span<uint8_t> acc,
                absl::Span<const uint8_t> in) {
  const size_t count = acc.size() / ItemSize(dtype);
  if (count == 0) return;
  VisitDType(dtype, [&](auto zero) {
    using T = decltype(zero);
    ReduceTyped<T, false>(op, acc.data(), nullptr, in.data(), count);
  });
}

void ReduceFrom(DType dtype, ReduceOp op, absl::Span<uint8_t> out,
                absl::Span<const uint8_t> a, absl::Span<const uint8_t> b) {
  if (out.data() == a.data()) {
    ReduceInto(dtype, op, out, b);
    return;
  }
  const size_t count = out.size() / ItemSize(dtype);
  if (count == 0) return;
  VisitDType(dtype, [&](auto zero) {
    using T = decltype(zero);
    ReduceTyped<T, true>(op, out.data(), a.data(), b.data(), count);
  });
}

ChunkedReduce::ChunkedReduce(DType dtype, ReduceOp op, absl::Span<uint8_t> acc,
                             absl::Span<const uint8_t> first)
    : dtype_(dtype),
      op_(op),
      item_(ItemSize(dtype)),
      acc_(acc),
      first_(first.empty() ? absl::Span<const uint8_t>(acc) : first) {}

void ChunkedReduce::Add(absl::Span<const uint8_t> chunk) {
  if (partial_size_ > 0) {
    const size_t n = std::min(item_ - partial_size_, chunk.size());
    std::memcpy(partial_ + partial_size_, chunk.data(), n);
    partial_size_ += n;
    chunk.remove_prefix(n);
    if (partial_size_ < item_) return;
    ReduceFrom(dtype_, op_, acc_.subspan(done_, item_),
               first_.subspan(done_, item_),
               absl::MakeConstSpan(partial_, item_));
    done_ += item_;
    partial_size_ = 0;
  }
  const size_t whole = chunk.size() / item_ * item_;
  ReduceFrom(dtype_, op_, acc_.subspan(done_, whole),
             first_.subspan(done_, whole), chunk.first(whole));
  done_ += whole;
  partial_size_ = chunk.size() - whole;
  if (partial_size_ > 0) {
    std::memcpy(partial_, chunk.data() + whole, partial_size_);
  }
}

const char* ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kMin:
      return "min";
    case ReduceOp::kSum:
      break;
  }
  return "sum";
}

}  // namespace shardmap
