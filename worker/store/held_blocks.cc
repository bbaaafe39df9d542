#include "worker/store/held_blocks.h"

#include <spdlog/spdlog.h>

#include "wire/proto_convert.h"

namespace shardmap {

std::vector<v1::HeldBlock> HeldBlocks(const ResidentStore& store) {
  std::vector<v1::HeldBlock> held;
  for (const auto& [name, block] : store.AllVersions()) {
    v1::HeldBlock b;
    b.set_name(name);
    b.set_version(block.version);
    b.set_device(block.device);
    if (block.layout.has_value()) {
      *b.mutable_header() =
          HeaderToProto(block.layout->meta.dtype, block.layout->meta.shape);
      *b.mutable_mesh() = MeshToProto(block.layout->mesh);
      *b.mutable_spec() = SpecToProto(block.layout->spec);
    }
    held.push_back(std::move(b));
  }
  return held;
}

void DropHeldBlocks(const std::vector<v1::HeldBlock>& drop,
                    ResidentStore* store) {
  for (const v1::HeldBlock& b : drop) {
    store->DropVersion(b.name(), b.version());
  }
  if (!drop.empty()) {
    spdlog::info("dropped {} resident blocks the coordinator has no use for",
                 drop.size());
  }
}

}  // namespace shardmap
