// Idle RSS of server processes, read by bounded polls instead of at a fixed
// moment: how soon a process gives memory back depends on how busy the
// machine is, so a reading taken after a fixed sleep fails on a loaded
// machine while a poll only waits longer there.
#ifndef SHARDMAP_TESTS_LOAD_RSS_POLL_H_
#define SHARDMAP_TESTS_LOAD_RSS_POLL_H_

#include <sys/types.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <functional>
#include <thread>
#include <vector>

#include "bench/bench_util.h"

namespace shardmap {

// VmRSS of `pid` in KiB, or -1.
inline long ReadRssKb(pid_t pid) {
  return shardmap_bench::ReadStatusKb(pid, "VmRSS:");
}

// RSS less the shared memory mapped (RssShmem) of `pid` in KiB, or -1: the
// memory the process alone holds. A worker's shared-memory rings (one per
// direction of each peer pair it exchanged data with, mapped for the life
// of the process) are not part of it.
inline long ReadPrivateRssKb(pid_t pid) {
  const long rss = ReadRssKb(pid);
  const long shm = shardmap_bench::ReadStatusKb(pid, "RssShmem:");
  return rss < 0 || shm < 0 ? -1 : rss - shm;
}

// Which reading the functions below poll: ReadRssKb or ReadPrivateRssKb.
using RssReader = long (*)(pid_t);

inline std::vector<long> ReadRssKb(const std::vector<pid_t>& pids,
                                   RssReader read = ReadRssKb) {
  std::vector<long> kb;
  for (pid_t p : pids) kb.push_back(read(p));
  return kb;
}

// Each process's lowest RSS, once none of them has reached a new low (by
// more than 256 KiB) for `settle`, or after `limit` at the latest: the
// idle RSS a process settles at once it has given its caches back.
inline std::vector<long> SettledRssKb(const std::vector<pid_t>& pids,
                                      std::chrono::milliseconds settle,
                                      std::chrono::milliseconds limit,
                                      RssReader read = ReadRssKb) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto last_low = start;
  std::vector<long> low = ReadRssKb(pids, read);
  while (Clock::now() - last_low < settle && Clock::now() - start < limit) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const std::vector<long> now = ReadRssKb(pids, read);
    for (size_t i = 0; i < pids.size(); ++i) {
      if (now[i] < 0) continue;
      // A first reading that failed (-1) is no low to keep.
      if (low[i] < 0 || now[i] + 256 < low[i]) last_low = Clock::now();
      low[i] = low[i] < 0 ? now[i] : std::min(low[i], now[i]);
    }
  }
  return low;
}

// Polls every 100 ms until `ok(rss)` holds for the processes' RSS, for at
// most `limit`. Returns the last reading; *seconds (if given) is how long
// it took, *met whether `ok` held.
inline std::vector<long> WaitForRssKb(
    const std::vector<pid_t>& pids,
    const std::function<bool(const std::vector<long>&)>& ok,
    std::chrono::milliseconds limit, bool* met, double* seconds = nullptr,
    RssReader read = ReadRssKb) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  std::vector<long> kb = ReadRssKb(pids, read);
  while (!(*met = ok(kb)) && Clock::now() - start < limit) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    kb = ReadRssKb(pids, read);
  }
  if (seconds != nullptr) {
    *seconds = std::chrono::duration<double>(Clock::now() - start).count();
  }
  return kb;
}

// Whether idle RSS `now` is back within `growth` (a fraction) or
// `slack_kb`, whichever is more, of `base`, for each process.
inline bool WithinIdleBounds(const std::vector<long>& base,
                             const std::vector<long>& now, double growth,
                             double slack_kb) {
  for (size_t i = 0; i < base.size(); ++i) {
    if (base[i] <= 0 || now[i] <= 0 ||
        now[i] - base[i] > std::max(growth * base[i], slack_kb)) {
      return false;
    }
  }
  return true;
}

// --max-rss-growth and --rss-slack-mib: how far idle RSS may grow, as a
// fraction, or in MiB where that is more.
inline void AddRssBoundFlags(CLI::App& app, double* max_growth,
                             double* slack_mib) {
  app.add_option("--max-rss-growth", *max_growth,
                 "largest allowed growth of a process's idle RSS (a "
                 "fraction)")
      ->capture_default_str();
  app.add_option("--rss-slack-mib", *slack_mib,
                 "growth of one process's idle RSS allowed even where it is "
                 "more than --max-rss-growth")
      ->capture_default_str();
}

}  // namespace shardmap

#endif  // SHARDMAP_TESTS_LOAD_RSS_POLL_H_
