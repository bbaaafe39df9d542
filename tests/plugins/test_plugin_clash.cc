// A plugin whose function takes a built-in's name ("add").
#include "shardmap/sdk.h"

SHARDMAP_PLUGIN(registrar) {
  registrar.Add(shardmap::sdk::Function("add", 2).Kernel(
      [](shardmap::sdk::Context&,
         const std::vector<shardmap::sdk::TensorView>& args)
          -> absl::StatusOr<std::vector<shardmap::sdk::TensorView>> {
        return std::vector<shardmap::sdk::TensorView>{args[0]};
      }));
}
