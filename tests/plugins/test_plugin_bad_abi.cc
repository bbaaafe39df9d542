// A plugin that claims an SDK ABI version no worker has (as one built
// against a future SDK would): its entry points written by hand.
#include "shardmap/sdk.h"

SHARDMAP_PLUGIN_EXPORT int shardmap_plugin_abi_version(void) { return 999; }
SHARDMAP_PLUGIN_EXPORT const char* shardmap_plugin_sdk_version(void) {
  return "9.9.9";
}
SHARDMAP_PLUGIN_EXPORT void shardmap_plugin_register(void* registrar) {
  static_cast<shardmap::sdk::Registrar*>(registrar)->Add(
      shardmap::sdk::Function("future_fn", 1)
          .Kernel(
              [](shardmap::sdk::Context&,
                 const std::vector<shardmap::sdk::TensorView>& args)
                  -> absl::StatusOr<std::vector<shardmap::sdk::TensorView>> {
                return args;
              }));
}
