// What a job's devices returned, turned into the job's result: which
// device's failure is the job's error, whether the outputs fit their
// out_specs and their copies agree (server/replication_check.h), and the
// whole outputs assembled from the representative devices' blocks.
//
// Pure functions of what the devices returned; thread-compatible.
#ifndef SHARDMAP_SERVER_OUTPUT_ASSEMBLY_H_
#define SHARDMAP_SERVER_OUTPUT_ASSEMBLY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/job_results.h"
#include "server/output_buffers.h"
#include "server/planner.h"
#include "server/worker_pool.h"

namespace shardmap {

// "device D (mesh coordinates C, worker ID at ADDRESS)".
std::string DeviceName(const JobPlan& plan, int64_t d,
                       const WorkerPool::Worker& w);

// The job's error if any device failed, else OK. `lost[d]` is set when
// device d's worker failed its liveness check mid-job: that device then
// failed with UNAVAILABLE whatever its stream said. The error reported is
// the root cause: a device's own error, not the CANCELLED its failure
// caused on the others; it names the device and worker. UNAVAILABLE
// (prefixed "... is unavailable: ") for a lost worker, with what a peer
// waiting on it saw; DEADLINE_EXCEEDED ("timed out waiting for ...");
// otherwise the device's own code.
absl::Status AttributeFailure(
    const std::string& job_id, const JobPlan& plan,
    const std::vector<WorkerPool::Worker>& workers,
    const std::vector<absl::Status>& lost,
    const std::vector<absl::StatusOr<DeviceResult>>& results);

// The checks AssembleOutputs makes, on what each device announced of its
// outputs (`results`, by device; their blocks are not looked at): the
// outputs' headers (stored_as set, data unset) and, in `layouts`, how
// their blocks lie in them.
absl::StatusOr<std::vector<JobOutput>> OutputHeaders(
    const JobPlan& plan, const std::vector<WorkerPool::Worker>& workers,
    const std::vector<const DeviceResult*>& results,
    std::vector<BlockLayout>* layouts);

// The job's outputs, once every device succeeded (`results` all OK).
// INVALID_ARGUMENT when devices returned blocks of different shapes or
// dtypes, blocks that do not fit out_specs, or copies that differ where a
// spec claims replication (CheckReplication; DATA_LOSS for resident reads
// whose copies differ); RESOURCE_EXHAUSTED for an output over
// `max_job_bytes`. Stored outputs get only their metadata. Moves the
// returned blocks out of `results`; a representative device without its
// block placed it into `buffers` already (OutputBuffers::SinkFor).
absl::StatusOr<std::vector<JobOutput>> AssembleOutputs(
    const JobPlan& plan, const std::vector<WorkerPool::Worker>& workers,
    std::vector<absl::StatusOr<DeviceResult>>& results, uint64_t max_job_bytes,
    OutputBuffers* buffers = nullptr);

}  // namespace shardmap

#endif  // SHARDMAP_SERVER_OUTPUT_ASSEMBLY_H_
