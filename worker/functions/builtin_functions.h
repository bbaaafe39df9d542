// The worker's built-in functions, each declared and implemented against
// the public SDK (include/shardmap/) exactly as a plugin's would be, and
// registered through the same path (sdk_function.h) by
// RegisterBuiltins and friends (function_registry.h).
//
// Each call returns fresh declarations; they hold no state.
#ifndef SHARDMAP_WORKER_FUNCTIONS_BUILTIN_FUNCTIONS_H_
#define SHARDMAP_WORKER_FUNCTIONS_BUILTIN_FUNCTIONS_H_

#include <vector>

#include "shardmap/function.h"

namespace shardmap {
namespace builtin {

// identity, add, mul, scale, relu, matmul, sum (builtins.cc).
std::vector<sdk::Function> ElementwiseFunctions();
// jax.lax's collectives of one array: psum, pmean, pmax, pmin, all_gather,
// psum_scatter, ppermute, all_to_all, and axis_index (lax_collectives.cc).
std::vector<sdk::Function> LaxCollectiveFunctions();
// matmul_psum, mlp_tp, global_sum (collective_functions.cc).
std::vector<sdk::Function> CompositeFunctions();
// accumulate, mul_by_state (state_functions.cc) and linear_sgd_step.
std::vector<sdk::Function> StateFunctions();
sdk::Function LinearSgdStepFunction();  // sgd_step.cc
// spin, fail_on, mismatch_on: psum with an injected fault, for fault tests
// (shardmap-worker --test-functions; test_functions.cc).
std::vector<sdk::Function> TestFunctions();

}  // namespace builtin
}  // namespace shardmap

#endif  // SHARDMAP_WORKER_FUNCTIONS_BUILTIN_FUNCTIONS_H_
