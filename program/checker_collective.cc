// jax.lax collectives: shapes by core/collective_rules.h (the same rules
// the workers' communicator applies), varying axes by JAX's check_vma
// (psum-family results are invariant over their axes; all_gather,
// psum_scatter, ppermute and all_to_all results vary over them;
// axis_index varies over its axes; axis_size is a Python int), and the
// bytes each device sends and receives by the ring algorithms.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/collective_rules.h"
#include "core/manual_axes.h"
#include "program/checker_internal.h"

namespace shardmap {
namespace program {
namespace checker_internal {
namespace {

using Keywords = std::vector<std::pair<std::string, Arg>>;

const std::map<std::string, std::vector<std::string>>& Params() {
  static const auto* p = new std::map<std::string, std::vector<std::string>>{
      {"psum", {"x", "axis_name"}},
      {"pmean", {"x", "axis_name"}},
      {"pmax", {"x", "axis_name"}},
      {"pmin", {"x", "axis_name"}},
      {"all_gather", {"x", "axis_name", "axis", "tiled"}},
      {"psum_scatter", {"x", "axis_name", "scatter_dimension", "tiled"}},
      {"ppermute", {"x", "axis_name", "perm"}},
      {"all_to_all", {"x", "axis_name", "split_axis", "concat_axis", "tiled"}},
      {"axis_index", {"axis_name"}},
      {"axis_size", {"axis_name"}}};
  return *p;
}

int Required(const std::string& fn) {
  if (fn == "axis_index" || fn == "axis_size") return 1;
  if (fn == "ppermute") return 3;
  if (fn == "all_to_all") return 4;
  return 2;
}

}  // namespace

absl::StatusOr<Value> Checker::Collective(const std::string& fn, SourcePos pos,
                                          const std::vector<Arg>& positional,
                                          const Keywords& keywords) {
  auto params = Params().find(fn);
  if (params == Params().end()) {
    return Error(pos, absl::StrCat("unknown function ", fn));
  }
  auto a = Bind(fn, pos, positional, keywords, params->second, Required(fn));
  if (!a.ok()) return a.status();
  const bool has_x = params->second[0] == "x";
  const Arg& axes_arg = (*a)[has_x ? 1 : 0];
  // The axes: a name or a tuple of names, first major.
  std::vector<std::string> axes;
  const Value& av = axes_arg.value;
  if (av.kind == Value::kString) {
    axes.push_back(av.text);
  } else if (av.kind == Value::kTuple) {
    for (const Value& v : av.items) {
      if (v.kind == Value::kString) axes.push_back(v.text);
    }
  }
  if ((av.kind != Value::kString && av.kind != Value::kTuple) ||
      axes.size() != (av.kind == Value::kString ? 1 : av.items.size())) {
    return Error(axes_arg.pos, absl::StrCat(fn,
                                            ": axis_name must be a mesh "
                                            "axis name or a tuple of them, "
                                            "got ",
                                            Describe(av)));
  }
  std::vector<std::string> mesh_names;
  for (const MeshAxis& m : mesh().axes()) mesh_names.push_back(m.name);
  for (const std::string& name : axes) {
    if (mesh().AxisPosition(name).has_value()) continue;
    std::string what =
        absl::StrCat(fn, ": unknown mesh axis '", name, "'; the mesh has ");
    std::vector<std::string> quoted;
    for (const std::string& m : mesh_names) {
      quoted.push_back(absl::StrCat("'", m, "'"));
    }
    absl::StrAppend(&what, absl::StrJoin(quoted, ", "));
    const std::string near = Nearest(name, mesh_names);
    if (!near.empty()) absl::StrAppend(&what, " (did you mean '", near, "'?)");
    return Error(axes_arg.pos, what);
  }
  const bool reduce =
      fn == "psum" || fn == "pmean" || fn == "pmax" || fn == "pmin";
  // psum(x, ()) is x, as JAX (pmean divides by 1, so an integer x still
  // becomes floating; it goes through below as a group of one).
  if (axes.empty() && reduce && fn != "pmean") return (*a)[0].value;
  auto positions = ResolveAxes(fn, mesh(), axes);
  if (!positions.ok()) return Error(axes_arg.pos, positions.status().message());
  absl::Status manual = CheckCollectiveManual(fn, axes, options().manual_axes);
  if (!manual.ok()) return Error(axes_arg.pos, manual.message());
  const int64_t n = GroupSize(mesh(), *positions);
  const std::set<std::string> axis_set(axes.begin(), axes.end());

  if (fn == "axis_size") {
    Value v;
    v.kind = Value::kInt;
    v.i = n;
    return v;
  }
  Instr in;
  in.pos = pos;
  in.attrs.mesh_axes = axes;
  if (fn == "axis_index") {
    in.op = OpCode::kAxisIndex;
    in.type.elem = ElemType::kInt32;
    in.type.vma = axis_set;
    auto i = Emit(in);
    if (!i.ok()) return i.status();
    return ArrayValue(*i, false);
  }
  const Value& x0 = (*a)[0].value;
  if (reduce && x0.kind != Value::kArray) {
    // A Python constant is the same on every device: psum gives n * c.
    auto d = DTypeOf((*a)[0].pos, x0);
    if (!d.ok()) return d.status();
    Value count;
    count.kind = Value::kInt;
    count.i = n;
    if (fn == "pmax" || fn == "pmin") return x0;
    auto sum = BinaryOp("multiply", pos, count, x0);
    if (!sum.ok() || fn == "psum") return sum;
    return BinaryOp("divide", pos, *sum, count);
  }
  auto d = DTypeOf((*a)[0].pos, x0);
  if (!d.ok()) return d.status();
  DType t = *d;
  if (fn == "psum" && t.elem == ElemType::kBool) t = {ElemType::kInt32, false};
  if (fn == "pmean") t = Inexact(t);
  auto x = AsArray((*a)[0].pos, x0, t);
  if (!x.ok()) return x.status();
  const ValueType& xt = TypeOf(*x);
  auto elements = Elements(pos, xt.shape);
  if (!elements.ok()) return elements.status();
  const int64_t bytes = *elements * ElemBytes(t.elem);
  in.operands = {x->instr};
  in.type = xt;
  auto int_arg = [&](int k, absl::string_view what,
                     int64_t fallback) -> absl::StatusOr<int64_t> {
    if (!(*a)[k].given) return fallback;
    return StaticInt(fn, what, (*a)[k]);
  };
  auto tiled_arg = [&](int k) -> absl::StatusOr<bool> {
    if (!(*a)[k].given) return false;
    return StaticBool(fn, "tiled", (*a)[k]);
  };
  if (reduce) {
    in.op = fn == "psum"    ? OpCode::kPsum
            : fn == "pmean" ? OpCode::kPmean
            : fn == "pmax"  ? OpCode::kPmax
                            : OpCode::kPmin;
    for (const std::string& ax : axes) in.type.vma.erase(ax);
    in.bytes_sent = in.bytes_received = 2 * (n - 1) * (bytes / n);
    in.flops = *elements;
  } else {
    in.type.vma.insert(axes.begin(), axes.end());
    absl::Status bad;
    SourcePos bad_pos = pos;
    if (fn == "all_gather") {
      auto axis = int_arg(2, "axis", 0);
      auto tiled = tiled_arg(3);
      if (!axis.ok()) return axis.status();
      if (!tiled.ok()) return tiled.status();
      auto ax = CheckAllGather(xt.shape, *axis, *tiled);
      if (!ax.ok()) {
        bad = ax.status();
        bad_pos = (*a)[2].given ? (*a)[2].pos : pos;
      } else {
        in.op = OpCode::kAllGather;
        in.attrs.axis = *ax;
        in.attrs.tiled = *tiled;
        if (*tiled) {
          in.type.shape[*ax] *= n;
        } else {
          in.type.shape.insert(in.type.shape.begin() + *ax, n);
        }
        in.bytes_sent = in.bytes_received = (n - 1) * bytes;
      }
    } else if (fn == "psum_scatter") {
      auto dim = int_arg(2, "scatter_dimension", 0);
      auto tiled = tiled_arg(3);
      if (!dim.ok()) return dim.status();
      if (!tiled.ok()) return tiled.status();
      auto dd = CheckPsumScatter(xt.shape, *dim, *tiled, n);
      if (!dd.ok()) {
        bad = dd.status();
        bad_pos = (*a)[2].given ? (*a)[2].pos : (*a)[0].pos;
      } else {
        in.op = OpCode::kPsumScatter;
        in.attrs.axis = *dd;
        in.attrs.tiled = *tiled;
        if (*tiled) {
          in.type.shape[*dd] /= n;
        } else {
          in.type.shape.erase(in.type.shape.begin() + *dd);
        }
        in.bytes_sent = in.bytes_received = (n - 1) * (bytes / n);
        in.flops = *elements;
      }
    } else if (fn == "ppermute") {
      auto s = PermPairs(fn, (*a)[2], n, &in.attrs.perm_pairs);
      if (s.ok()) s = CheckPpermuteAxesOrder(mesh(), axes);
      if (!s.ok()) {
        bad = s;
        bad_pos = (*a)[2].pos;
      } else {
        in.op = OpCode::kPpermute;
        in.bytes_sent = in.bytes_received = bytes;
      }
    } else {
      auto split = int_arg(2, "split_axis", 0);
      auto concat = int_arg(3, "concat_axis", 0);
      auto tiled = tiled_arg(4);
      if (!split.ok()) return split.status();
      if (!concat.ok()) return concat.status();
      if (!tiled.ok()) return tiled.status();
      auto sc =
          xt.shape.empty()
              ? absl::StatusOr<std::pair<int, int>>(absl::InvalidArgumentError(
                    "all_to_all needs an array of rank >= 1"))
              : CheckAllToAll(xt.shape, *split, *concat, *tiled, n);
      if (!sc.ok()) {
        bad = sc.status();
        bad_pos = (*a)[2].pos;
      } else {
        in.op = OpCode::kAllToAll;
        in.attrs.split_axis = sc->first;
        in.attrs.axis = sc->second;
        in.attrs.tiled = *tiled;
        std::vector<int64_t>& s = in.type.shape;
        if (*tiled) {
          s[sc->first] /= n;
          s[sc->second] *= n;
        } else {
          s.erase(s.begin() + sc->first);
          s.insert(s.begin() + sc->second, n);
        }
        in.bytes_sent = in.bytes_received = (n - 1) * (bytes / n);
      }
    }
    if (!bad.ok()) return Error(bad_pos, bad.message());
  }
  if (auto e = Elements(pos, in.type.shape); !e.ok()) return e.status();
  auto i = Emit(in);
  if (!i.ok()) return i.status();
  return ArrayValue(*i, t.weak);
}

absl::Status Checker::PermPairs(
    const std::string& fn, const Arg& perm, int64_t n,
    std::vector<std::pair<int64_t, int64_t>>* out) const {
  nlohmann::json j = nlohmann::json::array();
  bool ok = perm.value.kind == Value::kTuple;
  for (const Value& p : perm.value.items) {
    if (!ok) break;
    ok = p.kind == Value::kTuple && p.items.size() == 2 &&
         p.items[0].kind == Value::kInt && p.items[1].kind == Value::kInt;
    if (ok) j.push_back({p.items[0].i, p.items[1].i});
  }
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        fn,
        ": perm must be a list or tuple of (source, destination) pairs "
        "of Python ints, got ",
        Describe(perm.value)));
  }
  auto pairs = CheckPermutation(j, n);
  if (!pairs.ok()) return pairs.status();
  for (const auto& [s, d] : *pairs) out->emplace_back(s, d);
  return absl::OkStatus();
}

}  // namespace checker_internal
}  // namespace program
}  // namespace shardmap
