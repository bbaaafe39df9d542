// Runs one device's part of a job: looks the function up, checks the call
// against its signature, and calls the kernel on the device's blocks; or,
// for an expression program, checks it for this device's blocks (cached
// per source, mesh and block types) and evaluates it.
//
// Thread-safe: holds a read-only registry and a thread-safe cache.
#ifndef SHARDMAP_WORKER_SHARD_EXECUTOR_H_
#define SHARDMAP_WORKER_SHARD_EXECUTOR_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/mesh.h"
#include "core/tensor.h"
#include "program/program_cache.h"
#include "worker/functions/function_registry.h"

namespace shardmap {

struct ShardCall {
  std::string job_id;
  std::string function;
  // The source of an expression program to run instead of `function`.
  std::string program;
  Mesh mesh = *Mesh::Create({{"x", 1}});
  // The job's manual axes (JAX's axis_names); empty: every axis.
  std::vector<std::string> manual_axes;
  int64_t device_id = 0;
  std::vector<Tensor> args;
  std::string kwargs_json;
  // Handed to the kernel as CallContext::cancelled; null = never.
  std::function<bool()> cancelled;
  // Handed to the kernel as CallContext::reserve; null = no budget.
  std::function<absl::StatusOr<std::shared_ptr<void>>(uint64_t bytes)> reserve;
};

class ShardExecutor {
 public:
  explicit ShardExecutor(const FunctionRegistry* registry)
      : registry_(registry),
        programs_(std::make_unique<program::ProgramCache>()) {}

  // Errors: NOT_FOUND (unknown function), INVALID_ARGUMENT (the call does
  // not fit the signature, the kernel rejects the shapes, or the program
  // does not check), INTERNAL (a kernel that throws, or a plugin's output
  // that differs from its shape program's), and whatever the kernel or the
  // program returns. The device
  // id is in every message. `comm` gives the kernel its collectives; null for a
  // job without peers. `states` holds the function's state slots (see
  // CallContext).
  absl::StatusOr<std::vector<Tensor>> Run(
      ShardCall call, Communicator* comm = nullptr,
      std::map<std::string, Tensor>* states = nullptr) const;

  // Whether `function` is registered and local (FunctionDef::local).
  bool IsLocal(const std::string& function) const;

 private:
  absl::StatusOr<std::vector<Tensor>> RunProgram(ShardCall call,
                                                 Communicator* comm) const;
  // A plugin's outputs against its shape program run on the arguments'
  // block types: INTERNAL naming the function and the output that differs.
  absl::Status CheckPluginOutputs(const v1::FunctionSignature& sig,
                                  const ShardCall& call,
                                  const std::vector<program::ArgType>& args,
                                  const nlohmann::json& kwargs,
                                  const std::vector<Tensor>& outputs) const;

  const FunctionRegistry* const registry_;  // Not owned.
  const std::unique_ptr<program::ProgramCache> programs_;
};

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_SHARD_EXECUTOR_H_
