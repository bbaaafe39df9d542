// Runs one device's part of a job: looks the function up, checks the call
// against its signature, and calls the kernel on the device's blocks.
//
// Thread-safe: holds only a read-only registry.
#ifndef SHARDMAP_WORKER_SHARD_EXECUTOR_H_
#define SHARDMAP_WORKER_SHARD_EXECUTOR_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/mesh.h"
#include "core/tensor.h"
#include "worker/functions/function_registry.h"

namespace shardmap {

struct ShardCall {
  std::string job_id;
  std::string function;
  Mesh mesh = *Mesh::Create({{"x", 1}});
  int64_t device_id = 0;
  std::vector<Tensor> args;
  std::string kwargs_json;
  // Handed to the kernel as CallContext::cancelled; null = never.
  std::function<bool()> cancelled;
};

class ShardExecutor {
 public:
  explicit ShardExecutor(const FunctionRegistry* registry)
      : registry_(registry) {}

  // Errors: NOT_FOUND (unknown function), INVALID_ARGUMENT (the call does
  // not fit the signature, or the kernel rejects the shapes), and whatever
  // the kernel returns. The device id is in every message.
  // `comm` gives the kernel its collectives; null for a job without peers.
  // `states` holds the function's state slots (see CallContext).
  absl::StatusOr<std::vector<Tensor>> Run(
      ShardCall call, Communicator* comm = nullptr,
      std::map<std::string, Tensor>* states = nullptr) const;

 private:
  const FunctionRegistry* const registry_;  // Not owned.
};

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_SHARD_EXECUTOR_H_
