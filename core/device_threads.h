// Threads for calls that block for a whole job (the coordinator's jobs
// once admitted and its call for one device, a worker's call arriving on a
// job link), kept across jobs: a
// task runs at once on an idle thread, or on a new one when none is idle,
// so a job starts no thread of its own once the pool has warmed up. A
// thread idle for `idle_timeout` ends. There are never more threads than
// tasks that ran at once (on the coordinator bounded by its
// --max-concurrent-jobs, times the mesh size for device calls; on a worker
// by the calls its coordinator runs at once) plus those idling out.
//
// Thread-safe. The destructor waits for the tasks that run to return.
#ifndef SHARDMAP_CORE_DEVICE_THREADS_H_
#define SHARDMAP_CORE_DEVICE_THREADS_H_

#include <deque>
#include <functional>
#include <list>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace shardmap {

class DeviceThreads {
 public:
  explicit DeviceThreads(absl::Duration idle_timeout = absl::Seconds(10))
      : idle_timeout_(idle_timeout) {}
  ~DeviceThreads();
  DeviceThreads(const DeviceThreads&) = delete;
  DeviceThreads& operator=(const DeviceThreads&) = delete;

  // Runs `task` on a thread of the pool, at once.
  void Run(std::function<void()> task);

  // Threads alive (running a task or idle), and those idle.
  int size();
  int idle();

 private:
  void Loop();

  const absl::Duration idle_timeout_;
  absl::Mutex mu_;
  absl::CondVar wake_;  // a task arrived, or stopping
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  int idle_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::list<std::thread> threads_ ABSL_GUARDED_BY(mu_);
  // Threads that idled out, to be joined.
  std::vector<std::thread::id> ended_ ABSL_GUARDED_BY(mu_);
};

}  // namespace shardmap

#endif  // SHARDMAP_CORE_DEVICE_THREADS_H_
