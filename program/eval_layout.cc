#include "program/eval_layout.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "core/status_util.h"
#include "program/eval_scalar.h"
#include "program/types.h"

namespace shardmap {
namespace program {
namespace {

// Walks the view in C order: the innermost dimension in runs, the outer
// ones with an odometer that keeps the source offset in step.
template <typename E>
void GatherTyped(const StridedView& v, int64_t first, int64_t count, E* dst) {
  const E* src = reinterpret_cast<const E*>(v.src);
  const int rank = static_cast<int>(v.shape.size());
  if (rank == 0) {
    dst[0] = src[v.base];
    return;
  }
  std::vector<int64_t> idx(rank);
  int64_t off = v.base;
  int64_t rem = first;
  for (int d = rank - 1; d >= 0; --d) {
    idx[d] = rem % v.shape[d];
    rem /= v.shape[d];
    off += idx[d] * v.strides[d];
  }
  const int last = rank - 1;
  const int64_t inner = v.shape[last], step = v.strides[last];
  while (count > 0) {
    const int64_t run = std::min(inner - idx[last], count);
    if (step == 1) {
      std::memcpy(dst, src + off, run * sizeof(E));
    } else if (step == 0) {
      std::fill(dst, dst + run, src[off]);
    } else {
      for (int64_t j = 0; j < run; ++j) dst[j] = src[off + j * step];
    }
    dst += run;
    count -= run;
    off += run * step;
    idx[last] += run;
    if (idx[last] < inner) continue;
    off -= inner * step;
    idx[last] = 0;
    for (int d = last - 1; d >= 0; --d) {
      off += v.strides[d];
      if (++idx[d] < v.shape[d]) break;
      off -= v.strides[d] * v.shape[d];
      idx[d] = 0;
    }
  }
}

absl::StatusOr<Value> GatherAll(Budget& budget, const Instr& in,
                                const StridedView& view) {
  SHARD_ASSIGN_OR_RETURN(Value out, budget.Allocate(in.type));
  Gather(view, 0, out.count(), out.mutable_data());
  return out;
}

StridedView ViewOf(const Value& x) {
  StridedView v;
  v.src = x.data();
  v.elem_bytes = ElemBytes(x.elem);
  return v;
}

}  // namespace

std::vector<int64_t> RowMajorStrides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t s = 1;
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    strides[d] = s;
    s *= shape[d];
  }
  return strides;
}

std::vector<int64_t> BroadcastStrides(const Shape& from, const Shape& to) {
  std::vector<int64_t> strides(to.size(), 0);
  const std::vector<int64_t> own = RowMajorStrides(from);
  const int offset = static_cast<int>(to.size() - from.size());
  for (size_t i = 0; i < from.size(); ++i) {
    strides[offset + i] = from[i] == 1 ? 0 : own[i];
  }
  return strides;
}

void Gather(const StridedView& view, int64_t first, int64_t count,
            uint8_t* dst) {
  if (count <= 0) return;
  if (view.elem_bytes == 8) {
    GatherTyped<uint64_t>(view, first, count, reinterpret_cast<uint64_t*>(dst));
  } else {
    GatherTyped<uint32_t>(view, first, count, reinterpret_cast<uint32_t*>(dst));
  }
}

absl::StatusOr<Value> Transpose(Budget& budget, const Instr& in,
                                const Value& x) {
  StridedView v = ViewOf(x);
  const std::vector<int64_t> own = RowMajorStrides(x.shape);
  v.shape = in.type.shape;
  for (int64_t p : in.attrs.perm) v.strides.push_back(own[p]);
  return GatherAll(budget, in, v);
}

Value Reshape(const Instr& in, const Value& x) {
  Value out = x;
  out.shape = in.type.shape;
  return out;
}

absl::StatusOr<Value> Slice(Budget& budget, const Instr& in, const Value& x) {
  StridedView v = ViewOf(x);
  const std::vector<int64_t> own = RowMajorStrides(x.shape);
  v.shape = in.type.shape;
  for (size_t d = 0; d < own.size(); ++d) {
    v.base += in.attrs.starts[d] * own[d];
    v.strides.push_back(in.attrs.strides[d] * own[d]);
  }
  return GatherAll(budget, in, v);
}

absl::StatusOr<Value> Concatenate(Budget& budget, const Instr& in,
                                  const std::vector<const Value*>& xs) {
  SHARD_ASSIGN_OR_RETURN(Value out, budget.Allocate(in.type));
  const size_t eb = ElemBytes(out.elem);
  const Shape& shape = in.type.shape;
  const int64_t axis = in.attrs.axis;
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[d];
  std::vector<size_t> chunk;
  for (const Value* x : xs) {
    chunk.push_back(outer == 0 ? 0 : x->count() / outer * eb);
  }
  uint8_t* dst = out.mutable_data();
  for (int64_t o = 0; o < outer; ++o) {
    for (size_t i = 0; i < xs.size(); ++i) {
      std::memcpy(dst, xs[i]->data() + o * chunk[i], chunk[i]);
      dst += chunk[i];
    }
  }
  return out;
}

absl::StatusOr<Value> BroadcastTo(Budget& budget, const Instr& in,
                                  const Value& x) {
  StridedView v = ViewOf(x);
  v.shape = in.type.shape;
  v.strides = BroadcastStrides(x.shape, v.shape);
  return GatherAll(budget, in, v);
}

absl::StatusOr<Value> Constant(Budget& budget, const Instr& in) {
  SHARD_ASSIGN_OR_RETURN(Value out, budget.Allocate(in.type));
  VisitElem(out.elem, [&](auto tag) {
    using T = decltype(tag);
    T value;
    if (out.elem == ElemType::kBool) {
      value = in.attrs.int_value != 0 || in.attrs.value != 0;
    } else if constexpr (std::is_integral_v<T>) {
      value = CastElem<T>(in.attrs.int_value);
    } else {
      value = CastElem<T>(in.attrs.value);
    }
    std::fill_n(out.mutable_as<T>(), out.count(), value);
  });
  return out;
}

absl::StatusOr<Value> Iota(Budget& budget, const Instr& in) {
  SHARD_ASSIGN_OR_RETURN(Value out, budget.Allocate(in.type));
  VisitElem(out.elem, [&](auto tag) {
    using T = decltype(tag);
    T* d = out.mutable_as<T>();
    const int64_t n = out.count();
    for (int64_t i = 0; i < n; ++i) {
      d[i] =
          CastElem<T>(in.attrs.value + in.attrs.step * static_cast<double>(i));
    }
  });
  return out;
}

absl::StatusOr<Tensor> ToTensor(Value v) {
  if (v.storage.use_count() == 1 && v.storage->shape() == v.shape) {
    return std::move(*v.storage);
  }
  SHARD_ASSIGN_OR_RETURN(Tensor t, Tensor::Create(StorageOf(v.elem), v.shape));
  std::memcpy(t.data(), v.data(), t.num_bytes());
  return t;
}

}  // namespace program
}  // namespace shardmap
