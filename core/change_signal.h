// A counter of changes that one thread waits on while others announce
// them: the waiter reads generation(), checks what it waits for, and if
// it is not there waits for a change since that reading. No change is
// lost between the check and the wait.
//
// The coordinator's serial fan-out (server/device_fanout.h) waits on one
// for whichever of a job's device streams has something to read.
//
// Thread-safe.
#ifndef SHARDMAP_CORE_CHANGE_SIGNAL_H_
#define SHARDMAP_CORE_CHANGE_SIGNAL_H_

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace shardmap {

class ChangeSignal {
 public:
  uint64_t generation() {
    absl::MutexLock lock(&mu_);
    return generation_;
  }
  void Notify() {
    absl::MutexLock lock(&mu_);
    ++generation_;
  }
  // Waits until a change after `seen` (a generation() reading), or until
  // `until`; false if that passed first.
  bool WaitChanged(uint64_t seen, absl::Time until) {
    absl::MutexLock lock(&mu_);
    auto changed = [this, seen]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      return generation_ != seen;
    };
    return mu_.AwaitWithDeadline(absl::Condition(&changed), until);
  }

 private:
  absl::Mutex mu_;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace shardmap

#endif  // SHARDMAP_CORE_CHANGE_SIGNAL_H_
