#include "program/evaluator.h"

#include <limits>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status_util.h"
#include "program/eval_compute.h"
#include "program/eval_fusion.h"
#include "program/eval_layout.h"
#include "program/eval_validate.h"
#include "program/eval_value.h"

namespace shardmap {
namespace program {
namespace {

absl::Status CheckArgs(const Program& program,
                       const std::vector<Tensor>& args) {
  if (args.size() != program.params.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the program takes ", program.params.size(),
                     " arguments, got ", args.size()));
  }
  for (size_t k = 0; k < args.size(); ++k) {
    const ValueType& want = program.params[k];
    if (want.elem == ElemType::kBool) {
      return absl::InvalidArgumentError(
          absl::StrCat("argument ", k,
                       ": parameters cannot be bool (arrays that cross "
                       "the wire are float32, float64, int32 or int64)"));
    }
    if (args[k].dtype() != StorageOf(want.elem) ||
        args[k].shape() != want.shape) {
      return absl::InvalidArgumentError(absl::StrCat(
          "argument ", k, " is ", ShapeString(args[k].dtype(), args[k].shape()),
          " but the program was checked for ",
          ShapeString(StorageOf(want.elem), want.shape)));
    }
  }
  return absl::OkStatus();
}

// Runs one instruction that is not an elementwise group.
absl::StatusOr<Value> RunOne(const Instr& in, std::vector<Value>& values,
                             std::vector<Value>& params, int param_last_use,
                             Budget& budget, Collectives* collectives) {
  auto x = [&](int k) -> const Value& { return values[in.operands[k]]; };
  switch (in.op) {
    case OpCode::kParam: {
      Value& arg = params[in.attrs.index];
      if (param_last_use == budget.instruction()) return std::move(arg);
      return arg;
    }
    case OpCode::kConstant:
      return Constant(budget, in);
    case OpCode::kIota:
      return Iota(budget, in);
    case OpCode::kReduceSum:
    case OpCode::kReduceMax:
    case OpCode::kReduceMin:
    case OpCode::kMean:
    case OpCode::kArgMax:
      return Reduce(budget, in, x(0));
    case OpCode::kTranspose:
      return Transpose(budget, in, x(0));
    case OpCode::kReshape:
      return Reshape(in, x(0));
    case OpCode::kSlice:
      return Slice(budget, in, x(0));
    case OpCode::kConcatenate: {
      std::vector<const Value*> xs;
      for (int o : in.operands) xs.push_back(&values[o]);
      return Concatenate(budget, in, xs);
    }
    case OpCode::kBroadcast:
      return BroadcastTo(budget, in, x(0));
    case OpCode::kAxisIndex:
      return RunCollective(budget, in, nullptr, collectives);
    default:
      break;
  }
  return RunCollective(budget, in, &x(0), collectives);
}

// A matmul, reading a folded transpose's operand as a transposed matrix.
absl::StatusOr<Value> RunMatMul(const Program& program, const FusionPlan& plan,
                                const Instr& in,
                                const std::vector<Value>& values,
                                Budget& budget) {
  const Value* xs[2];
  bool transposed[2];
  for (int k = 0; k < 2; ++k) {
    const int o = in.operands[k];
    transposed[k] = plan.folded_transpose[o];
    xs[k] = &values[transposed[k] ? program.instrs[o].operands[0] : o];
  }
  return MatMul(budget, in, *xs[0], *xs[1], transposed[0], transposed[1]);
}

}  // namespace

absl::StatusOr<std::vector<Tensor>> Evaluate(const Program& program,
                                             std::vector<Tensor> args,
                                             Collectives* collectives,
                                             const EvalOptions& options) {
  SHARD_RETURN_IF_ERROR(ValidateProgram(program));
  SHARD_RETURN_IF_ERROR(CheckArgs(program, args));
  const int n = static_cast<int>(program.instrs.size());
  const FusionPlan plan = PlanFusion(program, options.fuse);

  // last_use[i]: the instruction (as run) after which value i is dropped;
  // outputs live to the end, unused values die where they are made.
  constexpr int kEnd = std::numeric_limits<int>::max();
  std::vector<int> last_use(n, -1);
  std::vector<int> param_last_use(program.params.size(), -1);
  for (int i = 0; i < n; ++i) {
    const Instr& in = program.instrs[i];
    for (int o : in.operands) {
      last_use[o] = std::max(last_use[o], plan.runs_at[i]);
    }
    if (in.op == OpCode::kParam) param_last_use[in.attrs.index] = i;
  }
  for (int o : program.outputs) last_use[o] = kEnd;
  std::vector<std::vector<int>> dies_at(n);
  for (int i = 0; i < n; ++i) {
    // Fused members never hold a value; outputs are never dropped.
    if (plan.runs_at[i] != i || last_use[i] == kEnd) continue;
    dies_at[last_use[i] < 0 ? i : last_use[i]].push_back(i);
  }

  std::vector<Value> params(args.size());
  for (size_t k = 0; k < args.size(); ++k) {
    params[k].shape = program.params[k].shape;
    params[k].elem = program.params[k].elem;
    params[k].storage = std::make_shared<Tensor>(std::move(args[k]));
  }
  Budget budget(program, options.max_bytes);
  std::vector<Value> values(n);
  for (int i = 0; i < n; ++i) {
    if (plan.runs_at[i] != i) continue;
    if (options.cancelled && options.cancelled()) {
      return absl::CancelledError(
          absl::StrCat("the program was cancelled before ", Where(program, i)));
    }
    budget.SetInstruction(i);
    const Instr& in = program.instrs[i];
    absl::StatusOr<Value> v;
    if (IsElementwise(in.op)) {
      v = RunGroup(program, plan.members[i], values, last_use, budget);
    } else if (in.op == OpCode::kMatMul) {
      v = RunMatMul(program, plan, in, values, budget);
    } else {
      v = RunOne(in, values, params,
                 in.op == OpCode::kParam ? param_last_use[in.attrs.index] : -1,
                 budget, collectives);
    }
    if (!v.ok()) return v.status();
    values[i] = *std::move(v);
    for (int d : dies_at[i]) Free(budget, values[d]);
  }

  std::vector<Tensor> outputs;
  for (size_t k = 0; k < program.outputs.size(); ++k) {
    const int o = program.outputs[k];
    bool again = false;
    for (size_t j = k + 1; j < program.outputs.size(); ++j) {
      again = again || program.outputs[j] == o;
    }
    Value v = values[o];
    if (!again) values[o].storage.reset();
    SHARD_ASSIGN_OR_RETURN(Tensor t, ToTensor(std::move(v)));
    outputs.push_back(std::move(t));
  }
  return outputs;
}

}  // namespace program
}  // namespace shardmap
