// What a worker tells the coordinator it holds when it (re-)registers,
// and how it frees what the coordinator says nobody can use.
//
// Thread-safe (the store is).
#ifndef SHARDMAP_WORKER_HELD_BLOCKS_H_
#define SHARDMAP_WORKER_HELD_BLOCKS_H_

#include <vector>

#include "shardmap/v1/registry.pb.h"
#include "worker/store/resident_store.h"

namespace shardmap {

// Every block `store` holds, every version kept, with its array's layout
// where known.
std::vector<v1::HeldBlock> HeldBlocks(const ResidentStore& store);

// Drops each (name, version) of `drop` from `store` (memory and
// --state-dir).
void DropHeldBlocks(const std::vector<v1::HeldBlock>& drop,
                    ResidentStore* store);

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_HELD_BLOCKS_H_
