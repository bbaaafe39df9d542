// Assembles the block of a resident array that one device of a job needs,
// by the job's mesh and spec, from the blocks the array's holders keep -
// resharding worker to worker, never through the coordinator. Parts held
// by this worker are copied locally; the rest are read from their holders
// (ReadBlock), preferring this worker when several hold a replica.
#ifndef SHARDMAP_WORKER_BLOCK_FETCH_H_
#define SHARDMAP_WORKER_BLOCK_FETCH_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/mesh.h"
#include "core/tensor.h"
#include "shardmap/v1/worker.pb.h"
#include "worker/store/resident_store.h"

namespace shardmap {

// Reads the bytes of a sub-box of a block another worker holds.
using RemoteBlockRead = std::function<absl::StatusOr<std::string>(
    const std::string& address, const v1::ReadBlockRequest& request,
    absl::Time deadline)>;

// Errors: INVALID_ARGUMENT if the job's spec does not fit the array,
// NOT_FOUND / UNAVAILABLE naming the holder if a part cannot be read.
absl::StatusOr<Tensor> FetchResidentBlock(const v1::ResidentSource& source,
                                          const Mesh& job_mesh, int64_t device,
                                          const std::string& my_address,
                                          const ResidentStore& store,
                                          const RemoteBlockRead& read,
                                          absl::Time deadline);

// Reads a sub-box of a block this worker holds, for the ReadBlock RPC.
absl::StatusOr<std::string> ReadLocalBox(const ResidentStore& store,
                                         const v1::ReadBlockRequest& request);

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_BLOCK_FETCH_H_
