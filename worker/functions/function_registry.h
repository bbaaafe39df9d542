// The functions a worker can run, by name, each with a declared signature
// so bad calls fail before they run. Every function - built-in or plugin -
// is declared and written against the public SDK (include/shardmap/) and
// registered as an sdk::Function; there is no other way in.
//
// Registration happens once at start (RegisterBuiltins(registry) from
// main, then the plugins); after that the registry is read-only and safe to
// share between threads.
#ifndef SHARDMAP_WORKER_FUNCTION_REGISTRY_H_
#define SHARDMAP_WORKER_FUNCTION_REGISTRY_H_

#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/mesh.h"
#include "core/tensor.h"
#include "shardmap/function.h"
#include "wire/signature.h"

namespace shardmap {

class Communicator;

// What the worker tells a call about where it runs, and how it reaches the
// other devices of its job (the SDK's Context is built over it).
struct CallContext {
  const Mesh* mesh = nullptr;  // Not owned.
  int64_t device_id = 0;
  std::vector<int64_t> coords;  // the device's mesh coordinates
  // The job's collectives; null when the job runs without peers (a kernel
  // that needs it then fails with FAILED_PRECONDITION). Not owned.
  Communicator* comm = nullptr;
  // This device's blocks of the function's state slots (brainstate
  // State), by slot name as the signature declares them. A kernel updates
  // a slot it declares `write` in place (or assigns a new tensor of the
  // same dtype and shape); the new value is stored only if the whole job
  // succeeds. Null when the function has no states. Not owned.
  std::map<std::string, Tensor>* states = nullptr;
  // True once the job is cancelled (the coordinator aborted it, its
  // deadline passed, or the coordinator went away). A kernel that computes
  // for long polls it and stops with CANCELLED.
  std::function<bool()> cancelled = [] { return false; };
  // Reserves `bytes` of the worker's --memory-budget for scratch memory
  // (the SDK's Context::Allocate) until the returned token is destroyed;
  // RESOURCE_EXHAUSTED over the limit. Null: no budget.
  std::function<absl::StatusOr<std::shared_ptr<void>>(uint64_t bytes)> reserve;
};

// How the worker calls a registered function: its blocks (it may consume
// them) and the keyword arguments with defaults filled in and JSON types
// checked. Made from the SDK kernel by KernelOf (sdk_function.h), which runs
// it through an sdk::Context.
using Kernel = std::function<absl::StatusOr<std::vector<Tensor>>(
    const CallContext& ctx, std::vector<Tensor>& args,
    const nlohmann::json& kwargs)>;

struct FunctionDef {
  v1::FunctionSignature signature;  // origin set
  Kernel kernel;
  // Computes one output on its own blocks only: no collectives, no
  // states, and in time that grows with its blocks alone. Only the worker's own
  // functions say so (RegisterBuiltins); a job of such a function on small
  // blocks may run on the thread that received it (worker/inline_call.h).
  bool local = false;
};

// FunctionSignature.origin of the functions compiled into the worker.
inline constexpr char kBuiltinOrigin[] = "builtin";

class FunctionRegistry {
 public:
  // Registers the function `fn` declares, with `origin` as its signature's
  // origin ("builtin", "plugin <path>"). INVALID_ARGUMENT for a malformed
  // declaration (SignatureOf in sdk_function.h); ALREADY_EXISTS naming both
  // origins if the name is taken.
  // `local`: FunctionDef::local.
  absl::Status Register(sdk::Function fn,
                        const std::string& origin = kBuiltinOrigin,
                        bool local = false);
  // NOT_FOUND listing the registered names.
  absl::StatusOr<const FunctionDef*> Find(const std::string& name) const;
  // The function, or null.
  const FunctionDef* FindOrNull(const std::string& name) const;
  std::vector<v1::FunctionSignature> Signatures() const;

 private:
  absl::Status Add(const Signature& signature, Kernel kernel,
                   const std::string& origin, bool local);

  std::map<std::string, FunctionDef> functions_;
};

// The built-in functions (builtin_functions.h), registered with origin
// "builtin"; each aborts on a registration error (a programming error).
// RegisterBuiltins: identity, add, mul, scale, relu, matmul, sum (each
// local: FunctionDef::local).
// RegisterCollectiveBuiltins: psum, pmean, pmax, pmin, all_gather,
// psum_scatter, ppermute, all_to_all, axis_index, matmul_psum, mlp_tp,
// global_sum.
void RegisterBuiltins(FunctionRegistry& registry);
void RegisterCollectiveBuiltins(FunctionRegistry& registry);
// RegisterStateBuiltins: the functions with state slots: accumulate,
// mul_by_state, linear_sgd_step.
void RegisterStateBuiltins(FunctionRegistry& registry);
// RegisterTestBuiltins: spin, fail_on and mismatch_on, psum with an
// injected fault, for fault tests (shardmap-worker --test-functions).
void RegisterTestBuiltins(FunctionRegistry& registry);

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_FUNCTION_REGISTRY_H_
