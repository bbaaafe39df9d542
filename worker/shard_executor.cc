#include "worker/shard_executor.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "core/status_util.h"
#include "program/dtypes.h"
#include "program/evaluator.h"
#include "wire/shape_program.h"
#include "wire/signature.h"
#include "worker/program_collectives.h"

namespace shardmap {

bool ShardExecutor::IsLocal(const std::string& function) const {
  const FunctionDef* def = registry_->FindOrNull(function);
  return def != nullptr && def->local;
}

absl::StatusOr<std::vector<Tensor>> ShardExecutor::Run(
    ShardCall call, Communicator* comm,
    std::map<std::string, Tensor>* states) const {
  if (!call.program.empty()) {
    if (states != nullptr && !states->empty()) {
      return absl::InvalidArgumentError(
          "expression programs take no state slots");
    }
    return RunProgram(std::move(call), comm);
  }
  SHARD_ASSIGN_OR_RETURN(const FunctionDef* def,
                         registry_->Find(call.function));
  SHARD_ASSIGN_OR_RETURN(nlohmann::json kwargs, ParseKwargs(call.kwargs_json));
  std::vector<DType> dtypes;
  for (const Tensor& t : call.args) dtypes.push_back(t.dtype());
  SHARD_ASSIGN_OR_RETURN(nlohmann::json resolved,
                         CheckCall(def->signature, dtypes, kwargs));
  if (call.device_id < 0 || call.device_id >= call.mesh.num_devices()) {
    return absl::InvalidArgumentError(absl::StrCat("device id ", call.device_id,
                                                   " is outside the mesh ",
                                                   call.mesh.ToString()));
  }
  CallContext ctx;
  ctx.mesh = &call.mesh;
  ctx.device_id = call.device_id;
  ctx.coords = call.mesh.Coords(call.device_id);
  ctx.comm = comm;
  ctx.states = states;
  if (call.cancelled) ctx.cancelled = call.cancelled;
  ctx.reserve = call.reserve;
  // A plugin is checked against its shape program: kept before the kernel
  // may consume its arguments.
  const bool check_shapes = def->signature.origin() != kBuiltinOrigin &&
                            !def->signature.shape_program().empty();
  std::vector<program::ArgType> arg_types;
  if (check_shapes) {
    for (const Tensor& t : call.args) {
      arg_types.push_back({program::ElemOf(t.dtype()), t.shape(), {}});
    }
  }
  absl::StatusOr<std::vector<Tensor>> outputs;
  try {
    outputs = def->kernel(ctx, call.args, resolved);
  } catch (const std::exception& e) {
    // Kernels return Status; an exception here (bad_alloc, json type error)
    // is reported, never allowed to take the worker down.
    outputs =
        absl::InternalError(absl::StrCat(call.function, " threw: ", e.what()));
  }
  if (!outputs.ok()) return outputs.status();
  if (static_cast<int>(outputs->size()) != def->signature.num_outputs()) {
    return absl::InternalError(
        absl::StrCat(call.function, " returned ", outputs->size(),
                     " outputs, but declares ", def->signature.num_outputs()));
  }
  if (check_shapes) {
    SHARD_RETURN_IF_ERROR(CheckPluginOutputs(def->signature, call, arg_types,
                                             resolved, *outputs));
  }
  return outputs;
}

absl::Status ShardExecutor::CheckPluginOutputs(
    const v1::FunctionSignature& sig, const ShardCall& call,
    const std::vector<program::ArgType>& args, const nlohmann::json& kwargs,
    const std::vector<Tensor>& outputs) const {
  const std::string& fn = sig.name();
  absl::StatusOr<std::string> source =
      RenderShapeProgram(sig.shape_program(), kwargs);
  absl::StatusOr<std::shared_ptr<const program::Program>> checked =
      source.ok() ? [&]() {
        program::CheckOptions options;
        options.check_vma = false;
        return programs_->Check(*source, call.mesh, args, options);
      }()
                  : source.status();
  if (!checked.ok()) {
    return absl::InternalError(
        absl::StrCat(fn, ": its shape program '", sig.shape_program(),
                     "' does not check: ", checked.status().message()));
  }
  const program::Program& p = **checked;
  if (p.outputs.size() != outputs.size()) {
    return absl::InternalError(absl::StrCat(
        fn, " returned ", outputs.size(), " outputs, but its shape program '",
        sig.shape_program(), "' gives ", p.outputs.size()));
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const program::ValueType& want = p.instrs[p.outputs[i]].type;
    const DType dtype = program::StorageOf(want.elem);
    if (outputs[i].dtype() != dtype || outputs[i].shape() != want.shape) {
      return absl::InternalError(absl::StrCat(
          fn, " returned output ", i, " as ",
          ShapeString(outputs[i].dtype(), outputs[i].shape()), " on device ",
          call.device_id, ", but its shape program '", sig.shape_program(),
          "' gives ", ShapeString(dtype, want.shape)));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Tensor>> ShardExecutor::RunProgram(
    ShardCall call, Communicator* comm) const {
  // The coordinator checked the program for the whole job, varying axes
  // included; here it is lowered for this device's blocks.
  std::vector<program::ArgType> args;
  for (const Tensor& t : call.args) {
    args.push_back({program::ElemOf(t.dtype()), t.shape(), {}});
  }
  program::CheckOptions options;
  options.check_vma = false;
  options.manual_axes = call.manual_axes;
  SHARD_ASSIGN_OR_RETURN(
      std::shared_ptr<const program::Program> checked,
      programs_->Check(call.program, call.mesh, args, options));
  std::optional<ProgramCollectives> collectives;
  if (comm != nullptr) collectives.emplace(comm);
  program::EvalOptions eval;
  if (call.cancelled) eval.cancelled = call.cancelled;
  try {
    return program::Evaluate(*checked, std::move(call.args),
                             collectives.has_value() ? &*collectives : nullptr,
                             eval);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("the program threw on device ",
                                            call.device_id, ": ", e.what()));
  }
}

}  // namespace shardmap
