// gRPC server reflection, off unless a server is started with
// --reflection. Debian's libgrpc++_reflection registers itself with every
// ServerBuilder as soon as it is loaded, so it is loaded only on request.
#ifndef SHARDMAP_CORE_REFLECTION_H_
#define SHARDMAP_CORE_REFLECTION_H_

#include "absl/status/status.h"

namespace shardmap {

// Makes every ServerBuilder constructed afterwards serve
// grpc.reflection.v1alpha.ServerReflection. UNAVAILABLE if the library
// cannot be loaded.
absl::Status EnableServerReflection();

}  // namespace shardmap

#endif  // SHARDMAP_CORE_REFLECTION_H_
