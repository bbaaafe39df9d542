// One RunJob call, served on gRPC's callback API (glue only): the call
// waits for its turn (JobAdmission) without a thread, then JobService runs
// the job on a pooled thread (DeviceThreads) over the call's stream,
// exactly as a synchronous handler would. So the coordinator's threads are
// bounded by the jobs it runs at once, however many clients wait.
//
// A call is answered at once when the drain gate or the admission queue
// refuses it (UNAVAILABLE, RESOURCE_EXHAUSTED). One that waits ends without
// running when its client cancels it (CANCELLED), when its deadline passes
// (DEADLINE_EXCEEDED, saying it never started and how long it waited), or
// when the coordinator drains (Close's UNAVAILABLE: safe to retry
// elsewhere). Either way JobService logs and counts it as a job that
// failed.
//
// Create through Start (the method's reactor factory); the call deletes
// itself when gRPC is done with it.
#ifndef SHARDMAP_SERVER_RUN_JOB_CALL_H_
#define SHARDMAP_SERVER_RUN_JOB_CALL_H_

#include <atomic>
#include <cstdint>
#include <memory>

#include "absl/time/time.h"
#include "core/device_threads.h"
#include "rpc/blocking_server_stream.h"
#include "rpc/drain_gate.h"
#include "server/deadline_watchdog.h"
#include "server/job_admission.h"
#include "server/job_service.h"

namespace shardmap {

// A call's deadline: the client's, capped by `max_job_time` from `start`.
absl::Time CallDeadline(const grpc::ServerContextBase& context,
                        absl::Time start, absl::Duration max_job_time);

class RunJobCall final : public BlockingServerStream {
 public:
  // What every call uses. None is owned; all outlive the server's calls.
  struct Services {
    JobService* jobs = nullptr;
    JobAdmission* admission = nullptr;
    DeviceThreads* threads = nullptr;  // where jobs run
    DeadlineWatchdog* watchdog = nullptr;
    DrainGate* gate = nullptr;  // may be null
    // A call whose client set no deadline, or a later one, gets this one.
    absl::Duration max_job_time = absl::Minutes(10);
  };

  static RunJobCall* Start(const Services& services,
                           grpc::CallbackServerContext* context);

  // A waiting call leaves the queue and ends.
  void OnCancel() override;

  // How long to wait past a call's deadline for its stream (the watchdog
  // cancels the call after half of it).
  static constexpr absl::Duration kStreamWaitMargin = absl::Seconds(1);

 private:
  RunJobCall(const Services& services, grpc::CallbackServerContext* context);
  // On a pooled thread, once admitted and the call's first message (or
  // its end) is in: the job, then the call's end.
  void Run();
  // A call that never runs: JobService fails it with call_.refused at once
  // (reading nothing), and the call ends with that.
  void Refuse(absl::Status why);
  // Takes the call out of the queue: true if it was waiting (the caller
  // then refuses it), false if it started or was refused.
  bool LeaveQueue();

  const Services services_;
  grpc::CallbackServerContext* const context_;  // Not owned.
  JobCall call_;
  std::unique_ptr<DrainGate::Pass> pass_;  // held until the call is done
  std::atomic<int64_t> ticket_{-1};        // in the queue; -1: none
  std::atomic<bool> started_{false};  // admitted (Run posted once readable)
  // Declared last, so they end (waiting for a callback that runs) before
  // anything their callbacks use is destroyed.
  // Cancels the call a little after its deadline, so a stalled client
  // cannot hold a job past it.
  std::unique_ptr<DeadlineWatchdog::Watch> watch_;
  // Ends a call still waiting for its turn at its deadline.
  std::unique_ptr<DeadlineWatchdog::Watch> queue_watch_;
};

}  // namespace shardmap

#endif  // SHARDMAP_SERVER_RUN_JOB_CALL_H_
