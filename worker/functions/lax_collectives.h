// jax.lax's collectives as built-in functions of one array (psum, pmean,
// pmax, pmin, all_gather, psum_scatter, ppermute, all_to_all) and
// axis_index, written against the public SDK (include/shardmap/) as a
// plugin's would be.
#ifndef SHARDMAP_WORKER_FUNCTIONS_LAX_COLLECTIVES_H_
#define SHARDMAP_WORKER_FUNCTIONS_LAX_COLLECTIVES_H_

#include <vector>

#include "shardmap/function.h"

namespace shardmap {

std::vector<sdk::Function> LaxCollectiveFunctions();

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_FUNCTIONS_LAX_COLLECTIVES_H_
