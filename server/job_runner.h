// Runs a planned job on its workers: ships each device only the blocks of
// the arguments it needs (server/shard_call.h), each device on a thread of
// its own, kept across jobs (server/device_fanout.h), checks and assembles the
// outputs (server/output_assembly.h), and commits the resident arrays the job
// writes (server/resident_commit.h). This class hands out the job tickets
// that order jobs on each worker (worker/job_sequencer.h) and makes sure
// every ticket reaches its worker (server/ticket_skipper.h).
//
// Fate-sharing: the first device that fails cancels the others, and the
// job fails with that device's error, naming the device and the worker.
//
// Thread-safe; every Run is independent.
#ifndef SHARDMAP_SERVER_JOB_RUNNER_H_
#define SHARDMAP_SERVER_JOB_RUNNER_H_

#include <atomic>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/device_threads.h"
#include "core/tensor.h"
#include "server/arriving_inputs.h"
#include "server/job_links.h"
#include "server/job_results.h"
#include "server/output_streaming.h"
#include "server/planner.h"
#include "server/resident_index.h"
#include "server/shard_channel.h"
#include "server/ticket_skipper.h"
#include "server/worker_pool.h"

namespace shardmap {

class JobRunner {
 public:
  struct Options {
    // Largest job (--max-job-bytes): its argument bytes plus the bytes of
    // the outputs it returns. Outputs over it fail the job with
    // RESOURCE_EXHAUSTED before the coordinator allocates them.
    uint64_t max_job_bytes = uint64_t{16} << 30;
    // While a job runs, each of its workers is checked this often with
    // `check_live`; a worker that fails the check fails the job with
    // UNAVAILABLE at once, instead of at the job's deadline. This is what
    // catches a worker that is stopped (SIGSTOP) or cut off mid-job.
    absl::Duration liveness_poll = absl::Milliseconds(100);
    std::function<absl::Status(const WorkerPool::Worker&)> check_live;
    // The longest a collective waits for one peer message (0: the
    // workers' default).
    absl::Duration collective_timeout = absl::ZeroDuration();
    // After a commit a worker did not confirm, the bound on telling the
    // job's workers to drop the versions it wrote.
    absl::Duration drop_timeout = absl::Seconds(5);
    // --job-links: when small jobs run their device calls on the workers'
    // long-lived links rather than a RunShard stream each.
    JobLinks job_links = JobLinks::kAuto;
  };
  // `index` may be null: jobs then cannot use resident arrays.
  JobRunner(const Options& options, WorkerConnector* connector,
            ResidentIndex* index = nullptr)
      : options_(options),
        connector_(connector),
        index_(index),
        skipper_(connector, TicketSkipper::Options{}) {}

  // Runs `plan` with `inputs` (whole arrays, one per argument); device i
  // runs on workers[i]. Errors: whatever a device returned (annotated with
  // the device and worker), UNAVAILABLE for a lost worker,
  // DEADLINE_EXCEEDED, INVALID_ARGUMENT for outputs that do not fit their
  // out_specs, or whose copies differ (returned ones with check_rep, stored
  // outputs and written states always; see replication_check.h), DATA_LOSS
  // for resident arrays read whose copies differ.
  // A job that writes resident arrays commits on every worker only if all
  // devices succeed (two-phase); then the index publishes the new versions.
  // If a worker does not confirm, nothing is published and the workers
  // drop the new versions again (resident_commit.h).
  // `cancelled` (polled like liveness) returning true aborts the job on
  // every worker: the client cancelled or went away.
  absl::StatusOr<std::vector<JobOutput>> Run(
      const std::string& job_id, const JobPlan& plan,
      std::vector<Tensor> inputs,
      const std::vector<WorkerPool::Worker>& workers, absl::Time deadline,
      const std::function<bool()>& cancelled = nullptr);
  // The same with arguments that are still arriving (cut-through): the
  // devices start at once and send each piece of their blocks as it comes
  // in, while `receive` (called once, on this thread, after the devices
  // started) reads the rest into `inputs`. An error from `receive` is the
  // job's error. With a `sink`, the returned outputs stream to it as the
  // devices send them (server/output_streaming.h), on this thread after
  // `receive`, when they can; the outputs returned then hold their headers
  // only (the sink has their bytes). Only a job that MayStreamOutputs
  // should be given one.
  absl::StatusOr<std::vector<JobOutput>> Run(
      const std::string& job_id, const JobPlan& plan, ArrivingInputs& inputs,
      const std::function<absl::Status()>& receive,
      const std::vector<WorkerPool::Worker>& workers, absl::Time deadline,
      const std::function<bool()>& cancelled = nullptr,
      ResultSink* sink = nullptr);

 private:
  // Hands out each worker's next job tickets; see worker/job_sequencer.h.
  std::vector<uint64_t> IssueTickets(
      const std::vector<WorkerPool::Worker>& workers);

  const Options options_;
  WorkerConnector* const connector_;  // Not owned.
  ResidentIndex* const index_;        // Not owned; may be null.
  // Tells workers of the tickets of devices whose job never reached them.
  TicketSkipper skipper_;
  // Where every job's device calls run.
  DeviceThreads device_threads_;
  // Jobs in Run now.
  std::atomic<int> running_{0};
  // Random per coordinator start; see TicketOwner (shard_call.h).
  const uint64_t epoch_ = std::random_device{}();
  absl::Mutex tickets_mu_;
  std::map<std::string, uint64_t> next_ticket_ ABSL_GUARDED_BY(tickets_mu_);
};

}  // namespace shardmap

#endif  // SHARDMAP_SERVER_JOB_RUNNER_H_
