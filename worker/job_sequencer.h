// Runs a worker's jobs one at a time, in the order the coordinator issued
// them. The coordinator numbers each worker's jobs 0, 1, 2, ... (tickets,
// per worker id) and hands out the tickets of all a job's workers at once,
// so any two jobs that share workers run in the same order on all of them:
// no job can wait in a collective on a peer busy with another job that
// waits on it.
//
// Tickets that never arrive (their jobs failed before reaching this
// worker) are skipped, all at once, after `gap_timeout`; one that arrives
// after all is refused with ABORTED. A job cancelled while waiting leaves
// its ticket behind as done. A new worker id (the worker registered again, e.g.
// after a coordinator restart) starts again from ticket 0.
//
// Thread-safe.
#ifndef SHARDMAP_WORKER_JOB_SEQUENCER_H_
#define SHARDMAP_WORKER_JOB_SEQUENCER_H_

#include <cstdint>
#include <functional>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace shardmap {

class JobSequencer {
 public:
  struct Options {
    absl::Duration gap_timeout = absl::Seconds(5);
  };
  explicit JobSequencer(Options options) : options_(options) {}

  // Waits until every earlier ticket has finished (or was given up on),
  // at most until `deadline`, while `cancelled` returns false. Errors:
  // ABORTED (a ticket whose turn has passed, or of an older worker id),
  // DEADLINE_EXCEEDED, CANCELLED.
  absl::Status Enter(const std::string& worker_id, uint64_t ticket,
                     absl::Time deadline,
                     const std::function<bool()>& cancelled);
  // Ends the turn Enter granted.
  void Leave(const std::string& worker_id, uint64_t ticket);

 private:
  const Options options_;
  absl::Mutex mu_;
  std::string worker_id_ ABSL_GUARDED_BY(mu_);
  uint64_t next_ ABSL_GUARDED_BY(mu_) = 0;  // whose turn it is
  std::set<uint64_t> arrived_ ABSL_GUARDED_BY(mu_);
  // Tickets whose jobs gave up while waiting: done, as far as order goes.
  std::set<uint64_t> abandoned_ ABSL_GUARDED_BY(mu_);
  absl::Time last_progress_ ABSL_GUARDED_BY(mu_) = absl::Now();
};

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_JOB_SEQUENCER_H_
