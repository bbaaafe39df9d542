// A client's job on the coordinator, from its first message to its last,
// without gRPC: admission (cluster bring-up; the concurrent job limit is
// the caller's, server/job_admission.h), idempotency (a call_id runs once;
// a retry is answered from its first run), the locks on the resident arrays
// it reads and writes (AccessOf in planner.h), planning, the byte quota,
// receiving the arguments, running (JobRunner) and sending the result.
// server/run_job_call adapts the gRPC call to JobStream and the returned
// status to gRPC.
//
// Thread-safe; every Run is independent.
#ifndef SHARDMAP_SERVER_JOB_SERVICE_H_
#define SHARDMAP_SERVER_JOB_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "program/program_cache.h"
#include "server/call_registry.h"
#include "server/function_catalog.h"
#include "server/job_runner.h"
#include "server/job_stream.h"
#include "server/name_locks.h"
#include "server/resident_index.h"
#include "server/worker_pool.h"

namespace shardmap {

// What the server knows of a RunJob call before reading it.
struct JobCall {
  absl::Time start = absl::Now();
  // The client's deadline, capped by the coordinator's longest job time.
  absl::Time deadline = absl::InfiniteFuture();
  // The call's trace, for the logs (core/trace_context.h).
  std::string trace_id;
  std::string span_id;
  // Not OK when the server refused the call before it began (it drains
  // after SIGTERM, its job queue is full, the call ended while it waited
  // for a turn): the job fails with it.
  absl::Status refused;
};

class JobService {
 public:
  struct Options {
    // Largest total of argument bytes one job may bring (--max-job-bytes;
    // the job runner adds the returned outputs to it).
    uint64_t max_job_bytes = uint64_t{16} << 30;
    // When set, every job first calls it with its deadline and fails with
    // its error: holds jobs while the cluster comes up
    // (CoordinatorHealth::AwaitBringUp).
    std::function<absl::Status(absl::Time deadline)> await_bring_up;
    // Called once per Run as it ends (metrics); `function` is empty if the
    // stream never named one.
    std::function<void(const std::string& function, absl::StatusCode code,
                       absl::Duration elapsed)>
        on_job_done;
    // Resolves what a job calls (programs included); null: the workers'
    // functions only. Not owned.
    const FunctionCatalog* catalog = nullptr;
    // Checked programs, shared with Plan; null: checked every time. Not
    // owned.
    program::ProgramCache* programs = nullptr;
  };
  // `calls` (idempotency keys) may be null: call_ids are then ignored.
  // None is owned.
  JobService(const Options& options, WorkerPool* pool, JobRunner* runner,
             ResidentIndex* index, NameLocks* locks, CallRegistry* calls)
      : options_(options),
        pool_(pool),
        runner_(runner),
        index_(index),
        locks_(locks),
        calls_(calls) {}
  JobService(const JobService&) = delete;
  JobService& operator=(const JobService&) = delete;

  // Runs the job `stream` carries and answers it there. Errors, in the
  // order they are checked: call.refused; INVALID_ARGUMENT for a stream
  // that does not
  // start with a JobSpec; await_bring_up's; CallRegistry::Begin's (a
  // call_id used for another request, or whose first run still runs at
  // the deadline); INVALID_ARGUMENT for a retry with other argument data,
  // ALREADY_EXISTS for one whose returned outputs were not kept;
  // DEADLINE_EXCEEDED naming the resident array another job still used;
  // PlanJob's; RESOURCE_EXHAUSTED over max_job_bytes; WorkerPool::Acquire's;
  // the arguments' (ArrivingInputs::Receive); JobRunner::Run's;
  // CANCELLED if the client went away. An error that comes once the deadline
  // passed says so (DEADLINE_EXCEEDED). A failed job changes no resident
  // array, except one whose client went away after the job committed, while
  // it was being sent the reply: its writes stand (a retry with its call_id
  // gets its recorded answer), and it counts as failed (CANCELLED).
  absl::Status Run(const JobCall& call, JobStream* stream);

  // Jobs that succeeded and that failed so far.
  int64_t completed() const { return completed_; }
  int64_t failed() const { return failed_; }

 private:
  // What Run reports of a job however it ended.
  struct JobEnd {
    std::string function;   // empty until the JobSpec is read
    bool replayed = false;  // answered from a first run (not counted)
  };
  // Run once the job has its id and log context.
  absl::Status RunJob(const std::string& job_id, const JobCall& call,
                      JobStream* stream, JobEnd* end);

  const Options options_;
  WorkerPool* const pool_;      // Not owned.
  JobRunner* const runner_;     // Not owned.
  ResidentIndex* const index_;  // Not owned.
  NameLocks* const locks_;      // Not owned.
  CallRegistry* const calls_;   // Not owned; may be null.
  std::atomic<int64_t> next_job_{0};
  std::atomic<int64_t> completed_{0};
  std::atomic<int64_t> failed_{0};
};

}  // namespace shardmap

#endif  // SHARDMAP_SERVER_JOB_SERVICE_H_
