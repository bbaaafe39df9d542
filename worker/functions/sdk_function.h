// From the SDK's declaration of a function (sdk::Function) to the worker's
// registry entry: the signature it declares, checked, and a Kernel that runs
// the SDK kernel through a WorkerContext. FunctionRegistry::Register uses
// both; built-in functions and plugins go through the same path.
#ifndef SHARDMAP_WORKER_FUNCTIONS_SDK_FUNCTION_H_
#define SHARDMAP_WORKER_FUNCTIONS_SDK_FUNCTION_H_

#include <string>

#include "absl/status/statusor.h"
#include "shardmap/function.h"
#include "wire/signature.h"
#include "worker/functions/function_registry.h"

namespace shardmap {

// The signature `fn` declares. INVALID_ARGUMENT naming the function and the
// field for a malformed one: a name that is not an identifier, a negative
// arity, no outputs, an unknown dtype or keyword argument type, a keyword
// argument or state slot named twice or not at all, a default that is not
// JSON of its type, a shape program `{placeholder}` that names no keyword
// argument, an unknown collective, or no kernel.
absl::StatusOr<Signature> SignatureOf(const sdk::Function& fn);

// A Kernel running `fn`'s kernel: errors it returns carry the function's
// name; a C++ exception becomes INTERNAL naming the function.
Kernel KernelOf(sdk::Function fn);

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_FUNCTIONS_SDK_FUNCTION_H_
