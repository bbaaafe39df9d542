// A text picture of which device holds which block of an array, as
// jax.debug.visualize_array_sharding draws it: a grid over the first two
// dimensions, one cell per block, naming the devices that hold it.
//
// Pure function; thread-safe.
#ifndef SHARDMAP_SERVER_SHARDING_PICTURE_H_
#define SHARDMAP_SERVER_SHARDING_PICTURE_H_

#include <string>

#include "core/block_math.h"
#include "core/mesh.h"

namespace shardmap {

// Every line ends in '\n' and starts with `indent`. Dimensions past the
// second are described below the grid, not drawn.
std::string ShardingPicture(const Mesh& mesh, const BlockLayout& layout,
                            const std::string& indent);

}  // namespace shardmap

#endif  // SHARDMAP_SERVER_SHARDING_PICTURE_H_
