// Layout rules (reshape, transpose, concatenate, stack, indexing) and the
// array constructors (zeros, ones, full, zeros_like, ones_like, arange).
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "program/checker_internal.h"

namespace shardmap {
namespace program {
namespace checker_internal {
namespace {

std::string Tuple(const std::vector<int64_t>& v) {
  return absl::StrCat("(", absl::StrJoin(v, ", "), v.size() == 1 ? ",)" : ")");
}

}  // namespace

absl::StatusOr<Value> Checker::ReshapeTo(SourcePos pos, const Value& x,
                                         const std::vector<int64_t>& shape) {
  if (TypeOf(x).shape == shape) return x;
  Instr in;
  in.op = OpCode::kReshape;
  in.operands = {x.instr};
  in.type = TypeOf(x);
  in.type.shape = shape;
  in.pos = pos;
  auto i = Emit(in);
  if (!i.ok()) return i.status();
  return ArrayValue(*i, x.weak);
}

absl::StatusOr<Value> Checker::Reshape(SourcePos pos, const Value& x0,
                                       const Arg& shape) {
  auto d = DTypeOf(pos, x0);
  if (!d.ok()) return d.status();
  auto x = AsArray(pos, x0, *d);
  if (!x.ok()) return x.status();
  auto dims = StaticInts("reshape", "shape", shape);
  if (!dims.ok()) return dims.status();
  if (dims->size() > kMaxRank) {
    return Error(shape.pos,
                 absl::StrCat("reshape: more than ", kMaxRank, " dimensions"));
  }
  auto total = Elements(pos, TypeOf(*x).shape);
  if (!total.ok()) return total.status();
  int64_t known = 1;
  int unknown = -1;
  for (size_t k = 0; k < dims->size(); ++k) {
    const int64_t v = (*dims)[k];
    if (v == -1 && unknown < 0) {
      unknown = static_cast<int>(k);
      continue;
    }
    if (v < 0) {
      return Error(shape.pos,
                   v == -1 ? "reshape: can only specify one unknown "
                             "dimension (-1)"
                           : "reshape: negative dimensions are not allowed");
    }
    if (v != 0 && known > INT64_MAX / v) known = INT64_MAX;
    known = known == INT64_MAX ? known : known * v;
  }
  std::vector<int64_t> out = *dims;
  bool ok = unknown < 0 ? known == *total : known != 0 && *total % known == 0;
  if (ok && unknown >= 0) out[unknown] = *total / known;
  if (!ok) {
    return Error(pos,
                 absl::StrCat("cannot reshape array of size ", *total, " (",
                              TypeString(TypeOf(*x).elem, TypeOf(*x).shape),
                              ") into shape ", Tuple(*dims)));
  }
  return ReshapeTo(pos, *x, out);
}

absl::StatusOr<Value> Checker::Transpose(SourcePos pos, const Value& x0,
                                         const Arg& perm) {
  auto d = DTypeOf(pos, x0);
  if (!d.ok()) return d.status();
  auto x = AsArray(pos, x0, *d);
  if (!x.ok()) return x.status();
  const ValueType& t = TypeOf(*x);
  const int64_t rank = static_cast<int64_t>(t.shape.size());
  std::vector<int64_t> p;
  if (!perm.given || perm.value.kind == Value::kNone) {
    for (int64_t k = rank - 1; k >= 0; --k) p.push_back(k);
  } else {
    auto given = StaticInts("transpose", "axes", perm);
    if (!given.ok()) return given.status();
    std::vector<bool> seen(rank, false);
    bool ok = static_cast<int64_t>(given->size()) == rank;
    for (int64_t a : *given) {
      if (!ok) break;
      const int64_t n = a < 0 ? a + rank : a;
      ok = n >= 0 && n < rank && !seen[n];
      if (ok) seen[n] = true;
      p.push_back(n);
    }
    if (!ok) {
      return Error(perm.pos, absl::StrCat("transpose: axes ", Tuple(*given),
                                          " are not a permutation of the ",
                                          rank, " dimensions of ",
                                          TypeString(t.elem, t.shape)));
    }
  }
  bool identity = true;
  for (int64_t k = 0; k < rank; ++k) identity = identity && p[k] == k;
  if (identity) return *x;
  Instr in;
  in.op = OpCode::kTranspose;
  in.operands = {x->instr};
  in.attrs.perm = p;
  in.type = t;
  for (int64_t k = 0; k < rank; ++k) in.type.shape[k] = t.shape[p[k]];
  in.pos = pos;
  auto i = Emit(in);
  if (!i.ok()) return i.status();
  return ArrayValue(*i, x->weak);
}

absl::StatusOr<Value> Checker::Concatenate(const std::string& fn, SourcePos pos,
                                           const Arg& list,
                                           const Arg& axis_arg) {
  if (list.value.kind != Value::kTuple || list.value.items.empty()) {
    return Error(list.pos, absl::StrCat(fn,
                                        ": expected a non-empty list or "
                                        "tuple of arrays, got ",
                                        Describe(list.value)));
  }
  DType t{ElemType::kBool, false};
  bool first = true;
  for (const Value& v : list.value.items) {
    auto d = DTypeOf(list.pos, v);
    if (!d.ok()) return d.status();
    t = first ? *d : Promote(t, *d);
    first = false;
  }
  int64_t axis = 0;
  if (axis_arg.given) {
    auto a = StaticInt(fn, "axis", axis_arg);
    if (!a.ok()) return a.status();
    axis = *a;
  }
  std::vector<Value> parts;
  std::vector<std::string> shown;
  for (const Value& v : list.value.items) {
    auto x = AsArray(list.pos, v, t);
    if (!x.ok()) return x.status();
    parts.push_back(*x);
    shown.push_back(TypeString(TypeOf(*x).elem, TypeOf(*x).shape));
  }
  const std::vector<int64_t> shape0 = TypeOf(parts[0]).shape;
  const int64_t rank = static_cast<int64_t>(shape0.size());
  if (fn == "stack") {
    auto a = NormalizeAxis(fn, axis_arg.pos, axis, rank + 1);
    if (!a.ok()) return a.status();
    axis = *a;
    std::vector<int64_t> expanded = shape0;
    expanded.insert(expanded.begin() + axis, 1);
    for (Value& p : parts) {
      if (TypeOf(p).shape != shape0) {
        return Error(list.pos, absl::StrCat("stack: all input arrays must "
                                            "have the same shape, got ",
                                            absl::StrJoin(shown, ", ")));
      }
      auto r = ReshapeTo(list.pos, p, expanded);
      if (!r.ok()) return r.status();
      p = *r;
    }
  } else {
    if (rank == 0) {
      return Error(list.pos,
                   "concatenate: zero-dimensional arrays cannot be "
                   "concatenated");
    }
    auto a = NormalizeAxis(fn, axis_arg.pos, axis, rank);
    if (!a.ok()) return a.status();
    axis = *a;
  }
  std::vector<int64_t> out = TypeOf(parts[0]).shape;
  out[axis] = 0;
  std::vector<const Value*> ptrs;
  for (const Value& p : parts) {
    const std::vector<int64_t>& s = TypeOf(p).shape;
    bool ok = s.size() == out.size();
    for (size_t k = 0; ok && k < s.size(); ++k) {
      ok = static_cast<int64_t>(k) == axis || s[k] == out[k];
    }
    if (!ok) {
      return Error(list.pos, absl::StrCat(fn,
                                          ": all input array dimensions "
                                          "except the concatenation axis ",
                                          axis, " must match, got ",
                                          absl::StrJoin(shown, ", ")));
    }
    out[axis] += s[axis];
    ptrs.push_back(&p);
  }
  if (parts.size() == 1) return parts[0];
  Instr in;
  in.op = OpCode::kConcatenate;
  for (const Value& p : parts) in.operands.push_back(p.instr);
  in.attrs.axis = axis;
  in.type.elem = t.elem;
  in.type.shape = out;
  in.type.vma = VmaUnion(ptrs);
  in.pos = pos;
  if (auto n = Elements(pos, out); !n.ok()) return n.status();
  auto i = Emit(in);
  if (!i.ok()) return i.status();
  return ArrayValue(*i, t.weak);
}

absl::StatusOr<Value> Checker::Index(SourcePos pos, const Value& x,
                                     const Value& index) {
  std::vector<Value> items;
  if (index.kind == Value::kTuple && !index.is_list) {
    items = index.items;
  } else {
    items.push_back(index);
  }
  const ValueType& t = TypeOf(x);
  const int64_t rank = static_cast<int64_t>(t.shape.size());
  int consuming = 0, ellipses = 0;
  for (const Value& v : items) {
    if (v.kind == Value::kInt || v.kind == Value::kSlice) {
      ++consuming;
    } else if (v.kind == Value::kEllipsis) {
      ++ellipses;
    } else if (v.kind != Value::kNone) {
      return Error(pos, absl::StrCat("not part of the program language: "
                                     "indexing with ",
                                     Describe(v),
                                     " (indices are ints, slices with constant "
                                     "bounds, None and ...)"));
    }
  }
  if (ellipses > 1)
    return Error(pos,
                 "an index can only have a single "
                 "ellipsis ('...')");
  if (consuming > rank) {
    return Error(
        pos, absl::StrCat("too many indices for an array of rank ", rank, " (",
                          TypeString(t.elem, t.shape), ")"));
  }
  std::vector<int64_t> starts, limits, strides, sliced, out;
  bool trivial = true;
  int64_t dim = 0;
  auto full = [&] {
    starts.push_back(0);
    limits.push_back(t.shape[dim]);
    strides.push_back(1);
    sliced.push_back(t.shape[dim]);
    out.push_back(t.shape[dim]);
    ++dim;
  };
  for (const Value& v : items) {
    if (v.kind == Value::kNone) {
      out.push_back(1);
    } else if (v.kind == Value::kEllipsis) {
      for (int k = 0; k < rank - consuming; ++k) full();
    } else if (v.kind == Value::kInt) {
      const int64_t size = t.shape[dim];
      if (v.i < -size || v.i >= size) {
        return Error(pos, absl::StrCat("index ", v.i,
                                       " is out of bounds for "
                                       "axis ",
                                       dim, " with size ", size));
      }
      const int64_t i = v.i < 0 ? v.i + size : v.i;
      starts.push_back(i);
      limits.push_back(i + 1);
      strides.push_back(1);
      sliced.push_back(1);
      trivial = trivial && size == 1;
      ++dim;
    } else {
      int64_t b[3] = {0, 0, 1};
      for (int k = 0; k < 3; ++k) {
        const Value& part = v.items[k];
        if (part.kind == Value::kNone) continue;
        if (part.kind != Value::kInt) {
          return Error(pos, absl::StrCat("slice bounds must be Python ints "
                                         "known before the program runs, "
                                         "got ",
                                         Describe(part)));
        }
        b[k] = part.i;
      }
      if (b[2] == 0) return Error(pos, "slice step cannot be zero");
      if (b[2] < 0) {
        return Error(pos,
                     "not part of the program language: negative slice "
                     "steps");
      }
      const int64_t size = t.shape[dim];
      auto clamp = [size](int64_t i) {
        if (i < 0) i += size;
        return std::min(std::max<int64_t>(i, 0), size);
      };
      const int64_t start = v.items[0].kind == Value::kNone ? 0 : clamp(b[0]);
      const int64_t stop = v.items[1].kind == Value::kNone ? size : clamp(b[1]);
      const int64_t len = stop > start ? (stop - start - 1) / b[2] + 1 : 0;
      starts.push_back(start);
      limits.push_back(len > 0 ? start + (len - 1) * b[2] + 1 : start);
      strides.push_back(b[2]);
      sliced.push_back(len);
      out.push_back(len);
      trivial = trivial && len == size;
      ++dim;
    }
  }
  while (dim < rank) full();
  if (out.size() > kMaxRank) {
    return Error(pos, absl::StrCat("more than ", kMaxRank, " dimensions"));
  }
  Value cur = x;
  if (!trivial) {
    Instr in;
    in.op = OpCode::kSlice;
    in.operands = {x.instr};
    in.attrs.starts = starts;
    in.attrs.limits = limits;
    in.attrs.strides = strides;
    in.type = t;
    in.type.shape = sliced;
    in.pos = pos;
    auto i = Emit(in);
    if (!i.ok()) return i.status();
    cur = ArrayValue(*i, x.weak);
  }
  return ReshapeTo(pos, cur, out);
}

}  // namespace checker_internal
}  // namespace program
}  // namespace shardmap
