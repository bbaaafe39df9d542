// Calls a function when a deadline passes, unless the watch ends first.
// The coordinator uses it to cancel a job's streams at the job's deadline,
// so a client that stalls (stops sending, or stops reading) holds a job no
// longer than the deadline, even if it set none of its own, and to end a
// call still waiting for its turn then.
//
// Thread-safe. Owns one background thread, joined by the destructor.
#ifndef SHARDMAP_SERVER_DEADLINE_WATCHDOG_H_
#define SHARDMAP_SERVER_DEADLINE_WATCHDOG_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace shardmap {

class DeadlineWatchdog {
 public:
  // Ends its watch when destroyed; after that `on_expire` never runs.
  class Watch {
   public:
    ~Watch();
    Watch(const Watch&) = delete;
    Watch& operator=(const Watch&) = delete;

   private:
    friend class DeadlineWatchdog;
    Watch(DeadlineWatchdog* owner, uint64_t id) : owner_(owner), id_(id) {}
    DeadlineWatchdog* const owner_;  // Not owned.
    const uint64_t id_;
  };

  // The loop looks at its watches at least every `max_sleep` (a clock
  // that jumps cannot strand one); tests lengthen it.
  explicit DeadlineWatchdog(absl::Duration max_sleep = absl::Seconds(1));
  ~DeadlineWatchdog();

  // `on_expire` runs at most once, on the watchdog's thread, under its
  // lock: it must be quick and must not call back into the watchdog.
  std::unique_ptr<Watch> Start(absl::Time deadline,
                               std::function<void()> on_expire);

 private:
  struct Entry {
    absl::Time deadline;
    std::function<void()> on_expire;
  };
  void Loop();
  void End(uint64_t id);

  absl::Mutex mu_;
  std::map<uint64_t, Entry> entries_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t changes_ ABSL_GUARDED_BY(mu_) = 0;
  const absl::Duration max_sleep_;
  // When the loop wakes next by itself (InfinitePast before its first
  // look, which sees every watch). A watch whose deadline is no earlier
  // needs no wake-up (most jobs': the loop looks at least every
  // max_sleep_), so a job costs the watchdog's thread nothing.
  absl::Time wake_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();

  // Declared last so it is joined before the state above is destroyed.
  std::thread thread_;
};

}  // namespace shardmap

#endif  // SHARDMAP_SERVER_DEADLINE_WATCHDOG_H_
