// The coordinator's turn-taking for jobs: at most `max_running` run at once;
// a job beyond that waits in a first-come queue (holding no thread: the
// RunJob call waits on gRPC's callback API) for a running one to end, and
// one beyond `max_queued` waiting jobs is refused. Without gRPC: the
// RunJob glue (server/run_job_call.h) submits each call's start and
// withdraws a waiting call its client cancelled.
//
//   auto ticket = admission.Submit([call] { pool.Run(call); });
//   ...                                 // the job ends:
//   admission.Done();                   // starts the next in line, if any
//
// Thread-safe. `start` functions run outside the lock, on the thread that
// called Submit (a free slot) or Done (the slot that job left).
#ifndef SHARDMAP_SERVER_JOB_ADMISSION_H_
#define SHARDMAP_SERVER_JOB_ADMISSION_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace shardmap {

class JobAdmission {
 public:
  struct Options {
    // Jobs running at once (--max-concurrent-jobs); 0: no limit.
    int max_running = 64;
    // Jobs waiting for a turn (--max-queued-jobs); 0: one too many is
    // refused at once.
    int max_queued = 1024;
  };
  explicit JobAdmission(const Options& options) : options_(options) {}
  JobAdmission(const JobAdmission&) = delete;
  JobAdmission& operator=(const JobAdmission&) = delete;

  // Runs `start` now if a slot is free, else queues it. Returns the job's
  // ticket (for Withdraw). RESOURCE_EXHAUSTED, naming both limits, when
  // max_running jobs run and max_queued wait (`start` is then dropped).
  absl::StatusOr<uint64_t> Submit(std::function<void()> start);
  // Removes a waiting job from the queue: true if it was waiting (its start
  // will never run), false if it has started (or never was submitted).
  bool Withdraw(uint64_t ticket);
  // A started job ended: its slot goes to the first waiting job, whose
  // start runs here.
  void Done();

  int running();
  int queued();

 private:
  const Options options_;
  absl::Mutex mu_;
  uint64_t next_ticket_ ABSL_GUARDED_BY(mu_) = 0;
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  // Waiting jobs, first come first.
  std::deque<std::pair<uint64_t, std::function<void()>>> queue_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace shardmap

#endif  // SHARDMAP_SERVER_JOB_ADMISSION_H_
