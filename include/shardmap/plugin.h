// Writing a plugin: a shared library that registers functions with the
// worker (shardmap-worker --plugin libmine.so).
//
//   #include "shardmap/sdk.h"
//   SHARDMAP_PLUGIN(registrar) {
//     registrar.Add(shardmap::sdk::Function("my_fn", 1).Kernel(MyKernel));
//   }
//
// The macro defines the library's entry points (C linkage):
//   int shardmap_plugin_abi_version(void);     // SHARDMAP_SDK_ABI_VERSION
//   const char* shardmap_plugin_sdk_version(void);
//   void shardmap_plugin_register(void* registrar);  // a Registrar*
// The worker checks the ABI version before it calls the registration.
#ifndef SHARDMAP_SDK_PLUGIN_H_
#define SHARDMAP_SDK_PLUGIN_H_

#include "shardmap/function.h"
#include "shardmap/version.h"

namespace shardmap {
namespace sdk {

// Collects a plugin's functions at load; the worker checks each (name free,
// signature well-formed, kernel set) once the registration returns.
class Registrar {
 public:
  virtual ~Registrar() = default;
  virtual void Add(Function function) = 0;
};

}  // namespace sdk
}  // namespace shardmap

#define SHARDMAP_PLUGIN_EXPORT extern "C" __attribute__((visibility("default")))

#define SHARDMAP_PLUGIN(registrar)                                           \
  static void ShardmapPluginRegister(::shardmap::sdk::Registrar& registrar); \
  SHARDMAP_PLUGIN_EXPORT int shardmap_plugin_abi_version(void) {             \
    return SHARDMAP_SDK_ABI_VERSION;                                         \
  }                                                                          \
  SHARDMAP_PLUGIN_EXPORT const char* shardmap_plugin_sdk_version(void) {     \
    return SHARDMAP_SDK_VERSION;                                             \
  }                                                                          \
  SHARDMAP_PLUGIN_EXPORT void shardmap_plugin_register(void* r) {            \
    ShardmapPluginRegister(*static_cast<::shardmap::sdk::Registrar*>(r));    \
  }                                                                          \
  static void ShardmapPluginRegister(::shardmap::sdk::Registrar& registrar)

#endif  // SHARDMAP_SDK_PLUGIN_H_
