// The coordinator's turn-taking for jobs: at most `max_running` run at once;
// a job beyond that waits in a first-come queue (holding no thread: the
// RunJob call waits on gRPC's callback API) for a running one to end, and
// one beyond `max_queued` waiting jobs is refused. Without gRPC: the
// RunJob glue (server/run_job_call.h) submits each call's start, withdraws
// a waiting call its client cancelled or whose deadline passed, and closes
// the queue when the coordinator drains.
//
//   auto ticket = admission.Submit([call] { pool.Run(call); },
//                                  [call](absl::Status why) { ... });
//   ...                                 // the job ends:
//   admission.Done();                   // starts the next in line, if any
//
// Thread-safe. `start` and `refuse` functions run outside the lock: start
// on the thread that called Submit (a free slot) or Done (the slot that job
// left), refuse on the thread that called Close.
#ifndef SHARDMAP_SERVER_JOB_ADMISSION_H_
#define SHARDMAP_SERVER_JOB_ADMISSION_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
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
    // If set, told the jobs running and waiting after every change, under
    // the admission's lock (so in order): it must be quick (a gauge).
    std::function<void(int running, int waiting)> on_change;
  };
  explicit JobAdmission(const Options& options) : options_(options) {}
  JobAdmission(const JobAdmission&) = delete;
  JobAdmission& operator=(const JobAdmission&) = delete;

  // Runs `start` now if a slot is free, else queues the job; `refuse` runs
  // instead of `start` if Close turns it away while it waits. Returns the
  // job's ticket (for Withdraw). RESOURCE_EXHAUSTED, naming both limits,
  // when max_running jobs run and max_queued wait; Close's status once
  // closed and no slot is free (neither function then runs).
  absl::StatusOr<uint64_t> Submit(std::function<void()> start,
                                  std::function<void(absl::Status)> refuse);
  // Removes a waiting job from the queue: true if it was waiting (neither
  // of its functions will run: the caller ends it), false if it has started
  // or was turned away (or never was submitted).
  bool Withdraw(uint64_t ticket);
  // A started job ended: its slot goes to the first waiting job, whose
  // start runs here.
  void Done();
  // No job waits from now on (the coordinator drains): every waiting job's
  // `refuse(why)` runs here, and a job that finds no free slot is refused
  // with `why`. Jobs running, and those that find a free slot, go on.
  void Close(const absl::Status& why);

  int running();
  int queued();
  // Both, at one moment.
  std::pair<int, int> counts();

 private:
  void ChangedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  absl::Mutex mu_;
  uint64_t next_ticket_ ABSL_GUARDED_BY(mu_) = 0;
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  struct Waiting {
    uint64_t ticket;
    std::function<void()> start;
    std::function<void(absl::Status)> refuse;
  };
  std::deque<Waiting> queue_ ABSL_GUARDED_BY(mu_);  // first come first
  absl::Status closed_ ABSL_GUARDED_BY(mu_);        // OK: open
};

}  // namespace shardmap

#endif  // SHARDMAP_SERVER_JOB_ADMISSION_H_
