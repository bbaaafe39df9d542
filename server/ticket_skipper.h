// Delivers the job tickets the coordinator gave up to their workers.
//
// Every ticket the coordinator issues must reach its worker, or the
// worker's later jobs wait for it (worker/job_sequencer.h). When a job
// fails or is cancelled before its header reached a device's worker, the
// job runner hands that ticket to Skip, which returns at once; a background
// sender per worker address then calls Worker.SkipTickets with a deadline,
// a bounded number of times. A skip to a worker that is gone is moot: after
// the last attempt it is dropped (logged).
//
// A worker address has a sender (a lane) only while skips for it are
// queued or being sent, so workers that come and go leave nothing behind.
//
// Thread-safe. Destroying the skipper waits for the calls under way (each
// bounded by its deadline) and drops the rest: a coordinator that stops
// takes its ticket order with it.
#ifndef SHARDMAP_SERVER_TICKET_SKIPPER_H_
#define SHARDMAP_SERVER_TICKET_SKIPPER_H_

#include <cstdint>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/shard_channel.h"

namespace shardmap {

class TicketSkipper {
 public:
  struct Options {
    int attempts = 4;
    absl::Duration attempt_timeout = absl::Seconds(2);
    absl::Duration retry_pause = absl::Milliseconds(200);
  };
  TicketSkipper(WorkerConnector* connector, Options options);
  ~TicketSkipper();

  // Queues a skip of `ticket` of `worker_id` (ShardJob.worker_id) for the
  // worker at `address`.
  void Skip(const std::string& address, const std::string& worker_id,
            uint64_t ticket);
  // Waits until every queued skip was delivered or dropped, at most
  // `timeout`; false on timeout. For tests.
  bool WaitIdle(absl::Duration timeout);
  // The worker addresses with skips queued or being sent. For tests.
  size_t lanes() const;

 private:
  struct Lane {
    // Queued tickets per worker id.
    std::map<std::string, std::vector<uint64_t>> pending;
    std::thread thread;  // its sender
  };
  // A lane's sender: sends until its queue is empty, then removes the lane
  // (leaving its thread to be joined).
  void Drain(const std::string& address);
  // One request, tried up to `attempts` times (fewer once stopping).
  void Send(const std::string& address, const v1::SkipTicketsRequest& request);

  WorkerConnector* const connector_;  // Not owned.
  const Options options_;
  mutable absl::Mutex mu_;
  // By address; a lane exists while its sender runs.
  std::map<std::string, Lane> lanes_ ABSL_GUARDED_BY(mu_);
  // Senders that ended, joined by the next Skip or the destructor.
  std::vector<std::thread> finished_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace shardmap

#endif  // SHARDMAP_SERVER_TICKET_SKIPPER_H_
