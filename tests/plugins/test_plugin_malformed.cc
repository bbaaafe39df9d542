// A plugin whose signature is malformed: a keyword argument of a type the
// worker does not know.
#include "shardmap/sdk.h"

SHARDMAP_PLUGIN(registrar) {
  registrar.Add(
      shardmap::sdk::Function("plug_malformed", 1)
          .Kwarg("alpha", "bogus_type", "the factor")
          .Kernel(
              [](shardmap::sdk::Context&,
                 const std::vector<shardmap::sdk::TensorView>& args)
                  -> absl::StatusOr<std::vector<shardmap::sdk::TensorView>> {
                return args;
              }));
}
