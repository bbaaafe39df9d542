#include "core/device_threads.h"

#include <algorithm>
#include <utility>

namespace shardmap {

DeviceThreads::~DeviceThreads() {
  std::list<std::thread> threads;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    threads.swap(threads_);
    wake_.SignalAll();
  }
  for (std::thread& t : threads) t.join();
}

int DeviceThreads::size() {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(threads_.size() - ended_.size());
}

int DeviceThreads::idle() {
  absl::MutexLock lock(&mu_);
  return idle_;
}

void DeviceThreads::Run(std::function<void()> task) {
  std::list<std::thread> reaped;
  {
    absl::MutexLock lock(&mu_);
    // Threads that idled out have returned from Loop: joining them is
    // quick.
    for (const std::thread::id id : ended_) {
      auto it =
          std::find_if(threads_.begin(), threads_.end(),
                       [id](const std::thread& t) { return t.get_id() == id; });
      if (it != threads_.end()) reaped.splice(reaped.end(), threads_, it);
    }
    ended_.clear();
    tasks_.push_back(std::move(task));
    // Every idle thread takes one task; a task more needs a new thread.
    if (tasks_.size() > static_cast<size_t>(idle_)) {
      threads_.emplace_back([this] { Loop(); });
    } else {
      wake_.Signal();
    }
  }
  for (std::thread& t : reaped) t.join();
}

void DeviceThreads::Loop() {
  absl::MutexLock lock(&mu_);
  while (true) {
    if (!tasks_.empty()) {
      std::function<void()> task = std::move(tasks_.front());
      tasks_.pop_front();
      mu_.Unlock();
      task();
      task = nullptr;  // its captures go before the thread waits again
      mu_.Lock();
      continue;
    }
    if (stopping_) return;
    ++idle_;
    const absl::Time give_up = absl::Now() + idle_timeout_;
    while (tasks_.empty() && !stopping_ && absl::Now() < give_up) {
      wake_.WaitWithDeadline(&mu_, give_up);
    }
    --idle_;
    if (tasks_.empty() && !stopping_) {
      ended_.push_back(std::this_thread::get_id());
      return;
    }
  }
}

}  // namespace shardmap
