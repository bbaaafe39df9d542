// Runs a worker's jobs one at a time, in the order the coordinator issued
// them. The coordinator numbers each worker's jobs 0, 1, 2, ... (tickets,
// per worker id) and hands out the tickets of all a job's workers at once,
// so any two jobs that share workers run in the same order on all of them:
// no job can wait in a collective on a peer busy with another job that
// waits on it.
//
// Every ticket reaches the worker: as a job, or as a skip (Skip; the
// coordinator sends one for a job that failed before its header arrived
// here). A missing ticket is therefore waited for, never guessed lost: the
// only ends of a wait are the turn, the job's own deadline, its
// cancellation, a skip of its own ticket, and the worker registering again.
// A job that gives up waiting leaves its ticket behind as done.
//
// Worker ids: a new id (the worker registered again, e.g. after a
// coordinator restart) starts the order again from ticket 0, and the ids
// before it are retired: their jobs and skips, arriving late, change
// nothing. Skips of an id not seen yet are kept for when its first job
// arrives (bounded).
//
// Thread-safe.
#ifndef SHARDMAP_WORKER_JOB_SEQUENCER_H_
#define SHARDMAP_WORKER_JOB_SEQUENCER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace shardmap {

class JobSequencer {
 public:
  JobSequencer() = default;

  // Waits until every earlier ticket has finished or was given up, at most
  // until `deadline`, while `cancelled` returns false. Errors: ABORTED (a
  // ticket whose turn has passed, that was skipped, or of a retired worker
  // id), DEADLINE_EXCEEDED, CANCELLED.
  absl::Status Enter(const std::string& worker_id, uint64_t ticket,
                     absl::Time deadline,
                     const std::function<bool()>& cancelled);
  // Whether the turn of `ticket` has come and no job runs: Enter would then
  // grant it without waiting (only this ticket's job can take the turn).
  // False for an id other than the current one.
  bool TurnIsNow(const std::string& worker_id, uint64_t ticket);
  // Ends the turn Enter granted.
  void Leave(const std::string& worker_id, uint64_t ticket);
  // The ticket's job will not run here: later tickets need not wait for it,
  // and if it is waiting in Enter it ends with ABORTED. No effect on a
  // ticket that ran or is running.
  void Skip(const std::string& worker_id, uint64_t ticket);

 private:
  // Makes `worker_id` the current id if it is new. False if it is retired.
  bool AdoptLocked(const std::string& worker_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool RetiredLocked(const std::string& worker_id) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves past the tickets at the front that are done.
  void AdvanceLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  std::string worker_id_ ABSL_GUARDED_BY(mu_);
  uint64_t next_ ABSL_GUARDED_BY(mu_) = 0;     // whose turn it is
  bool running_ ABSL_GUARDED_BY(mu_) = false;  // next_ entered, not left
  // Tickets after next_ that will not run: skipped (true) or whose jobs
  // gave up waiting (false).
  std::map<uint64_t, bool> done_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> retired_ ABSL_GUARDED_BY(mu_);
  // Skips of ids not seen yet, oldest id first.
  std::deque<std::pair<std::string, std::set<uint64_t>>> early_skips_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_JOB_SEQUENCER_H_
