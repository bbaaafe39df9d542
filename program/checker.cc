// The checker's entry points: the function's parameters and statements,
// its outputs, dead-code removal, the peak-memory figure and the limits,
// and JAX's output replication rule.
#include "program/checker.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "program/checker_internal.h"
#include "program/parser.h"
#include "program/source_error.h"

namespace shardmap {
namespace program {
namespace checker_internal {
namespace {

int64_t SaturatingBytes(const ValueType& t) {
  int64_t n = ElemBytes(t.elem);
  for (int64_t d : t.shape) {
    if (d != 0 && n > INT64_MAX / d) return INT64_MAX;
    n *= d;
  }
  return n;
}

}  // namespace

absl::StatusOr<Program> Checker::Run(const FunctionAst& f,
                                     const std::vector<ArgType>& args) {
  if (args.size() != f.params.size()) {
    const SourcePos p = f.param_pos.empty() ? SourcePos{1, 1} : f.param_pos[0];
    return Error(p, absl::StrCat(f.name, " has ", f.params.size(),
                                 f.params.size() == 1 ? " param" : " params",
                                 " but ", args.size(),
                                 args.size() == 1 ? " argument" : " arguments",
                                 " given"));
  }
  for (size_t k = 0; k < args.size(); ++k) {
    Instr in;
    in.op = OpCode::kParam;
    in.attrs.index = static_cast<int64_t>(k);
    in.type.elem = args[k].elem;
    in.type.shape = args[k].block_shape;
    in.type.vma = args[k].vma;
    in.pos = f.param_pos[k];
    if (in.type.shape.size() > kMaxRank) {
      return Error(in.pos,
                   absl::StrCat("argument ", k, " has rank ",
                                in.type.shape.size(), ", over ", kMaxRank));
    }
    if (auto n = Elements(in.pos, in.type.shape); !n.ok()) return n.status();
    auto i = Emit(in);
    if (!i.ok()) return i.status();
    prog_.params.push_back(At(*i).type);
    env_[f.params[k]] = ArrayValue(*i);
  }
  for (const Statement& st : f.body) {
    auto v = Eval(*st.value);
    if (!v.ok()) return v.status();
    if (st.is_return) {
      auto outs = Outputs(*v, *st.value);
      if (!outs.ok()) return outs.status();
      prog_.outputs = *outs;
      break;
    }
    if (st.targets.size() == 1) {
      env_[st.targets[0]] = *v;
      continue;
    }
    if (v->kind != Value::kTuple || v->items.size() != st.targets.size()) {
      return Error(st.value->pos,
                   absl::StrCat("cannot unpack ", Describe(*v), " into ",
                                st.targets.size(), " names"));
    }
    for (size_t k = 0; k < st.targets.size(); ++k) {
      env_[st.targets[k]] = v->items[k];
    }
  }
  if (auto s = Finish(); !s.ok()) return s;
  return std::move(prog_);
}

absl::StatusOr<std::vector<int>> Checker::Outputs(const Value& v,
                                                  const Expr& e) {
  std::vector<const Value*> items;
  std::vector<SourcePos> pos;
  // Several outputs come from a tuple the return names or writes out
  // (what ParseSignature can tell from the source); any other tuple is
  // not an output.
  const bool several = e.kind == ExprKind::kTuple ||
                       e.kind == ExprKind::kName ||
                       e.kind == ExprKind::kSubscript;
  if (v.kind == Value::kTuple && !several) {
    return Error(e.pos, absl::StrCat("the program returns ", Describe(v),
                                     ": outputs must be arrays (write "
                                     "several outputs as a tuple literal)"));
  }
  if (v.kind == Value::kTuple) {
    for (size_t k = 0; k < v.items.size(); ++k) {
      items.push_back(&v.items[k]);
      const bool literal = e.kind == ExprKind::kTuple && k < e.args.size();
      pos.push_back(literal ? e.args[k]->pos : e.pos);
    }
  } else {
    items.push_back(&v);
    pos.push_back(e.pos);
  }
  if (items.empty()) return Error(e.pos, "the program returns no outputs");
  std::vector<int> out;
  for (size_t k = 0; k < items.size(); ++k) {
    Value x = *items[k];
    if (x.kind == Value::kInt || x.kind == Value::kFloat ||
        x.kind == Value::kBool) {
      auto t = DTypeOf(pos[k], x);
      if (!t.ok()) return t.status();
      auto a = AsArray(pos[k], x, *t);
      if (!a.ok()) return a.status();
      x = *a;
    }
    if (x.kind != Value::kArray) {
      return Error(pos[k], absl::StrCat("output ", k, " is ", Describe(x),
                                        ": outputs must be arrays"));
    }
    if (TypeOf(x).elem == ElemType::kBool) {
      return Error(pos[k], absl::StrCat("output ", k,
                                        " is bool: shardmap "
                                        "arrays are float32, float64, int32 "
                                        "or int64; use .astype(...)"));
    }
    out.push_back(x.instr);
  }
  return out;
}

absl::Status Checker::Finish() {
  // Drop what no output needs (parameters stay: they are the arguments).
  const int n = static_cast<int>(prog_.instrs.size());
  std::vector<bool> live(n, false);
  for (int o : prog_.outputs) live[o] = true;
  for (int i = n - 1; i >= 0; --i) {
    if (prog_.instrs[i].op == OpCode::kParam) live[i] = true;
    if (!live[i]) continue;
    for (int o : prog_.instrs[i].operands) live[o] = true;
  }
  std::vector<int> renumber(n, -1);
  std::vector<Instr> kept;
  for (int i = 0; i < n; ++i) {
    if (!live[i]) continue;
    Instr in = std::move(prog_.instrs[i]);
    for (int& o : in.operands) o = renumber[o];
    renumber[i] = static_cast<int>(kept.size());
    kept.push_back(std::move(in));
  }
  prog_.instrs = std::move(kept);
  for (int& o : prog_.outputs) o = renumber[o];

  // Peak bytes: parameters from the start, every value freed after its
  // last use, outputs kept to the end.
  const int m = static_cast<int>(prog_.instrs.size());
  std::vector<int> last_use(m, -1);
  for (int i = 0; i < m; ++i) {
    for (int o : prog_.instrs[i].operands) last_use[o] = i;
  }
  for (int o : prog_.outputs) last_use[o] = m;
  auto add = [](int64_t a, int64_t b) {
    return a > INT64_MAX - b ? INT64_MAX : a + b;
  };
  int64_t alive = 0;
  int params = 0;
  while (params < m && prog_.instrs[params].op == OpCode::kParam) {
    alive = add(alive, SaturatingBytes(prog_.instrs[params].type));
    ++params;
  }
  int64_t peak = alive;
  int peak_at = params > 0 ? 0 : -1;
  for (int p = 0; p < params; ++p) {
    if (last_use[p] < 0) alive -= SaturatingBytes(prog_.instrs[p].type);
  }
  for (int i = params; i < m; ++i) {
    const Instr& in = prog_.instrs[i];
    alive = add(alive, SaturatingBytes(in.type));
    if (alive > peak) {
      peak = alive;
      peak_at = i;
    }
    std::vector<int> ops = in.operands;
    std::sort(ops.begin(), ops.end());
    ops.erase(std::unique(ops.begin(), ops.end()), ops.end());
    for (int o : ops) {
      if (last_use[o] == i) alive -= SaturatingBytes(prog_.instrs[o].type);
    }
  }
  prog_.peak_bytes = peak;
  if (peak > options_.limits.max_peak_bytes) {
    const SourcePos p =
        peak_at >= 0 ? prog_.instrs[peak_at].pos : SourcePos{1, 1};
    return SourceError(
        src_, p,
        absl::StrCat("the program holds ", peak,
                     " bytes per device at once here (its peak), over the "
                     "limit of ",
                     options_.limits.max_peak_bytes, " bytes (max_peak_bytes)"),
        absl::StatusCode::kResourceExhausted);
  }
  return absl::OkStatus();
}

}  // namespace checker_internal

namespace {

absl::Status CheckSourceSize(absl::string_view source, const Limits& limits) {
  if (static_cast<int64_t>(source.size()) > limits.max_source_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the program's source is ", source.size(), " bytes, over the limit of ",
        limits.max_source_bytes, " bytes (max_source_bytes)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Signature> ParseSignature(absl::string_view source,
                                         const Limits& limits) {
  if (auto s = CheckSourceSize(source, limits); !s.ok()) return s;
  auto f = Parse(source);
  if (!f.ok()) return f.status();
  Signature sig;
  sig.name = f->name;
  sig.params = f->params;
  const Expr& ret = *f->body.back().value;
  if (ret.kind == ExprKind::kTuple) {
    sig.num_outputs = static_cast<int>(ret.args.size());
  } else if (ret.kind != ExprKind::kName && ret.kind != ExprKind::kSubscript) {
    sig.num_outputs = 1;
  }
  return sig;
}

absl::StatusOr<Program> CheckProgram(absl::string_view source, const Mesh& mesh,
                                     const std::vector<ArgType>& args,
                                     const CheckOptions& options) {
  if (auto s = CheckSourceSize(source, options.limits); !s.ok()) return s;
  auto f = Parse(source);
  if (!f.ok()) return f.status();
  return checker_internal::Checker(source, mesh, options).Run(*f, args);
}

absl::Status CheckOutputReplication(const Program& program, const Mesh& mesh,
                                    const std::vector<PartitionSpec>& out_specs,
                                    absl::string_view function,
                                    absl::string_view source) {
  const size_t n = program.outputs.size();
  if (out_specs.size() != 1 && out_specs.size() != n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "out_specs has ", out_specs.size(), " specs for the program's ", n,
        " outputs; give one per output or one for all"));
  }
  std::vector<std::string> details;
  std::optional<size_t> first_bad;
  for (size_t k = 0; k < n; ++k) {
    const PartitionSpec& spec =
        out_specs.size() == 1 ? out_specs[0] : out_specs[k];
    const std::set<std::string>& vma =
        program.instrs[program.outputs[k]].type.vma;
    std::vector<std::string> mentioned, unmentioned, bad;
    for (const MeshAxis& a : mesh.axes()) {
      (spec.Mentions(a.name) ? mentioned : unmentioned).push_back(a.name);
      if (!spec.Mentions(a.name) && vma.count(a.name)) bad.push_back(a.name);
    }
    if (bad.empty()) continue;
    if (!first_bad.has_value()) first_bad = k;
    const std::string path =
        absl::StrCat("out_specs[", k, "] is ", spec.ToString());
    if (unmentioned.size() == 1) {
      details.push_back(absl::StrCat(
          "* ", path,
          " which implies that the corresponding output value is "
          "replicated across mesh axis '",
          unmentioned[0], "', but could not infer replication over any axes"));
    } else {
      std::vector<std::string> varying;
      for (const MeshAxis& a : mesh.axes()) {
        if (vma.count(a.name)) varying.push_back(a.name);
      }
      details.push_back(absl::StrCat(
          "* ", path,
          " which implies that the corresponding output value is "
          "only varying across mesh axes {",
          absl::StrJoin(mentioned, ","), "} and not {", absl::StrJoin(bad, ","),
          "}, but it was inferred to be possibly varying over {",
          absl::StrJoin(varying, ","), "}"));
    }
  }
  if (details.empty()) return absl::OkStatus();
  // Where the first such output is made, when the source is known.
  std::string where;
  const SourcePos pos = program.instrs[program.outputs[*first_bad]].pos;
  if (!source.empty() && pos.line > 0) {
    where = absl::StrCat("\n", SourceMessage(source, pos,
                                             absl::StrCat("output ", *first_bad,
                                                          " is made here")));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "shard_map applied to the function '", function,
      "' was given out_specs which "
      "require replication which can't be statically inferred given the "
      "mesh:\n\nThe mesh given has ",
      mesh.Describe(), ".\n\n", absl::StrJoin(details, "\n"),
      "\n\nCheck if these output values are meant to be replicated over those "
      "mesh axes. If not, consider revising the corresponding out_specs "
      "entries. If so, consider disabling the check by passing the "
      "check_vma=False argument to `jax.shard_map` (--no-check-rep).",
      where));
}

}  // namespace program
}  // namespace shardmap
