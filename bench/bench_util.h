// What every benchmark driver shares, shardmap's and the references' alike,
// so they measure the same way: the iteration counts of
// docs/BENCHMARKS.md (Method), and peak RSS from /proc. Header-only
// and free of project dependencies: the MPI and Gloo drivers include it
// too (run.sh builds them with -I at the project root).
#ifndef SHARDMAP_BENCH_BENCH_UTIL_H_
#define SHARDMAP_BENCH_BENCH_UTIL_H_

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <thread>

namespace shardmap_bench {

// Warm-up 20/5/2/1 and measured 200/50/20/5 iterations for messages of at
// most 64 KiB, 256 KiB, 4 MiB, and larger; `scale` shrinks them (--quick),
// never below 1 warm-up and 3 measured, nor below 9 measured for messages
// of at most 4 MiB (a median of 5 such iterations, each a millisecond or
// less, moved by a factor of 2 between runs).
inline void Iterations(long long bytes, double scale, int* warmup, int* iters) {
  int w, n;
  if (bytes <= (64 << 10)) {
    w = 20, n = 200;
  } else if (bytes <= (256 << 10)) {
    w = 5, n = 50;
  } else if (bytes <= (4 << 20)) {
    w = 2, n = 20;
  } else {
    w = 1, n = 5;
  }
  *warmup = std::max(1, static_cast<int>(std::lround(w * scale)));
  *iters = std::max(bytes <= (4 << 20) ? 9 : 3,
                    static_cast<int>(std::lround(n * scale)));
}

inline std::string ProcPath(pid_t pid, const char* file) {
  return (pid == 0 ? std::string("/proc/self/")
                   : "/proc/" + std::to_string(pid) + "/") +
         file;
}

// A "Field:   123 kB" line of /proc/<pid>/status (0: this process) in
// KiB, or -1.
inline long ReadStatusKb(pid_t pid, const std::string& field) {
  std::ifstream f(ProcPath(pid, "status"));
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(field, 0) == 0) {
      return std::atol(line.c_str() + field.size());
    }
  }
  return -1;
}

// What a process has cost so far, from /proc: CPU time (user + system, of
// every thread it ran, ended ones included; clock-tick resolution) and
// context switches (voluntary and involuntary) of each thread alive now.
// cpu_us is -1 when the process is gone.
struct ProcessCost {
  double cpu_us = -1;
  std::map<long, long long> switches;  // by thread id
};

inline ProcessCost ReadProcessCost(pid_t pid) {
  ProcessCost cost;
  std::ifstream stat(ProcPath(pid, "stat"));
  const std::string text((std::istreambuf_iterator<char>(stat)),
                         std::istreambuf_iterator<char>());
  // The fields after the command, which is in parentheses and may hold
  // spaces: the 3rd field of the line comes first; utime and stime are
  // the 14th and 15th.
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return cost;
  std::istringstream fields(text.substr(close + 1));
  std::string field;
  unsigned long long ticks = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i >= 14) ticks += std::strtoull(field.c_str(), nullptr, 10);
  }
  cost.cpu_us = ticks * 1e6 / sysconf(_SC_CLK_TCK);
  const std::string tasks = ProcPath(pid, "task");
  DIR* dir = opendir(tasks.c_str());
  if (dir == nullptr) return cost;
  while (const dirent* entry = readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    std::ifstream status(tasks + "/" + entry->d_name + "/status");
    std::string line;
    long long switches = 0;
    while (std::getline(status, line)) {
      if (line.find("ctxt_switches:") != std::string::npos) {
        switches += std::atoll(line.c_str() + line.find(':') + 1);
      }
    }
    cost.switches[std::atol(entry->d_name)] = switches;
  }
  closedir(dir);
  return cost;
}

// The context switches from `before` to `after` of the threads alive at
// `after` (one started meanwhile counts from 0; one that ended meanwhile
// loses only what it did in between).
inline long long SwitchesBetween(const ProcessCost& before,
                                 const ProcessCost& after) {
  long long total = 0;
  for (const auto& [tid, switches] : after.switches) {
    const auto it = before.switches.find(tid);
    total += switches - (it == before.switches.end() ? 0 : it->second);
  }
  return total;
}

// Peak RSS (VmHWM) of process `pid` (0: this one) in KiB, or -1.
inline long ReadHwmKb(pid_t pid = 0) { return ReadStatusKb(pid, "VmHWM:"); }

// Starts a new peak for `pid` (0: this one); Linux >= 4.0, best effort.
inline void ResetHwm(pid_t pid = 0) {
  const int fd = open(ProcPath(pid, "clear_refs").c_str(), O_WRONLY);
  if (fd < 0) return;
  if (write(fd, "5", 1) < 0) {
    // Nothing to do: the peak then covers more than the step.
  }
  close(fd);
}

// A barrier whose waiters poll instead of sleeping in the kernel, as
// MPI_Barrier and gloo::barrier wait: every rank leaves it running, so an
// iteration's time does not include waking a peer that slept in the
// barrier (a futex wake-up on a busy 2-core host costs as much as a whole
// small collective). Waiters yield the core at every poll (a waiter may
// hold the core a party still has to arrive on, or that its own process's
// gRPC threads need), as Open MPI does when oversubscribed; with `spin`
// and no more parties than cores they spin instead, as Open MPI does when
// it is not (for ranks whose processes have nothing else to run: the
// shared-memory path; spinning slowed the gRPC path's 2-rank psum by up
// to a third). Lock-free atomics only, so it works in memory shared
// between forked processes (MAP_SHARED) as well as between threads. A
// rank that never comes leaves the others polling: the drivers' watchdogs
// end such a run.
class SpinBarrier {
 public:
  SpinBarrier(int parties, bool spin)
      : parties_(parties),
        spin_(spin && parties <= static_cast<int>(
                                     std::thread::hardware_concurrency())) {}

  void Wait() {
    const unsigned round = round_.load(std::memory_order_acquire);
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == parties_) {
      arrived_.store(0, std::memory_order_relaxed);
      round_.fetch_add(1, std::memory_order_release);
      return;
    }
    while (round_.load(std::memory_order_acquire) == round) {
      if (!spin_) {
        sched_yield();
        continue;
      }
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
  }

 private:
  static_assert(std::atomic<int>::is_always_lock_free &&
                    std::atomic<unsigned>::is_always_lock_free,
                "shared between processes");
  const int parties_;
  const bool spin_;
  std::atomic<int> arrived_{0};
  std::atomic<unsigned> round_{0};
};

// Ends the process (exit 1, naming `who`) after `seconds`: a benchmark
// that hangs fails instead. Processes it started with PDEATHSIG die too.
inline void StartWatchdog(const char* who, int seconds) {
  std::thread([who, seconds] {
    std::this_thread::sleep_for(std::chrono::seconds(seconds));
    std::fprintf(stderr, "%s: timed out after %d s\n", who, seconds);
    std::_Exit(1);
  }).detach();
}

}  // namespace shardmap_bench

#endif  // SHARDMAP_BENCH_BENCH_UTIL_H_
