// RegisterBuiltins and friends: the built-in functions (builtin_functions.h,
// all written against the public SDK) into a registry, through
// FunctionRegistry::Register - the path a plugin's functions take.
#include <cstdlib>
#include <iostream>
#include <utility>
#include <vector>

#include "worker/functions/builtin_functions.h"
#include "worker/functions/function_registry.h"

namespace shardmap {
namespace {

// A built-in that does not register is a programming error. `local`:
// FunctionDef::local.
void MustRegister(FunctionRegistry& registry,
                  std::vector<sdk::Function> functions, bool local = false) {
  for (sdk::Function& fn : functions) {
    if (absl::Status s =
            registry.Register(std::move(fn), kBuiltinOrigin, local);
        !s.ok()) {
      std::cerr << "registering built-in functions: " << s << std::endl;
      std::abort();
    }
  }
}

}  // namespace

void RegisterBuiltins(FunctionRegistry& registry) {
  MustRegister(registry, builtin::ElementwiseFunctions(), /*local=*/true);
}

void RegisterCollectiveBuiltins(FunctionRegistry& registry) {
  MustRegister(registry, builtin::LaxCollectiveFunctions());
  MustRegister(registry, builtin::CompositeFunctions());
}

void RegisterStateBuiltins(FunctionRegistry& registry) {
  MustRegister(registry, builtin::StateFunctions());
}

void RegisterTestBuiltins(FunctionRegistry& registry) {
  MustRegister(registry, builtin::TestFunctions());
}

}  // namespace shardmap
