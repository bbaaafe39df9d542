// Streams a job's returned outputs on to its client while the devices
// still send them (cut-through): once every device has announced its
// outputs and they pass the checks the assembly makes, the job's result
// goes out, then each output's chunks as soon as the bytes they hold are
// in (OutputBuffers), so the worker-to-coordinator hop overlaps the
// coordinator-to-client one.
#ifndef SHARDMAP_SERVER_OUTPUT_STREAMING_H_
#define SHARDMAP_SERVER_OUTPUT_STREAMING_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/job_results.h"
#include "server/output_buffers.h"
#include "server/planner.h"
#include "server/worker_pool.h"
#include "shardmap/v1/common.pb.h"
#include "wire/chunking.h"

namespace shardmap {

// The job's client, as the outputs stream to it. Called on one thread.
class ResultSink {
 public:
  virtual ~ResultSink() = default;
  // Sends the job's result for `outputs` (headers, stored_as set; no
  // data). False if the client went away.
  virtual bool Begin(const std::vector<JobOutput>& outputs) = 0;
  // Sends the next chunk of a returned output (output by output, each in
  // order), lent from the whole output. False if the client went away.
  virtual bool Chunk(LentChunk&& chunk) = 0;
};

// Whether `plan`'s outputs may stream while its devices run: only for a
// job that changes and holds nothing. A client that leaves mid-download
// fails the job, which must then cost no recorded outcome (a `keyed` job,
// one with a call_id), no donation and no commit; and a slow download must
// not hold resident arrays' locks (a job that reads or writes any).
bool MayStreamOutputs(const JobPlan& plan, bool keyed);

// Streams `plan`'s returned outputs from `buffers` to `sink`. Returns the
// outputs' headers (JobOutput without data: the job's outcome) once every
// returned byte went to the sink; nullopt, having sent nothing, when the
// outputs cannot stream (a block not placed in a whole output: the
// assembly judges it once the devices are done) or need not (they return
// at most one chunk). Errors: the checks' (as AssembleOutputs reports
// them), the error the buffers were stopped with (a device failed),
// CANCELLED for a client that went away, DEADLINE_EXCEEDED at `deadline`.
absl::StatusOr<std::optional<std::vector<JobOutput>>> StreamOutputs(
    const JobPlan& plan, const std::vector<WorkerPool::Worker>& workers,
    OutputBuffers& buffers, ResultSink& sink, absl::Time deadline,
    const OutputBuffers::Watch& watch);

}  // namespace shardmap

#endif  // SHARDMAP_SERVER_OUTPUT_STREAMING_H_
