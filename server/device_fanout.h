// Runs one job's device calls at once, each on a thread of the
// coordinator's DeviceThreads (kept across jobs), and watches
// them: the first device that fails cancels the others' streams
// (fate-sharing); while they run, every `liveness_poll` the client's
// `cancelled` and each running device's worker (`check_live`) are checked,
// so a client that left or a worker that stopped answering (SIGSTOP, cut
// off) ends the job at once instead of at its deadline.
//
// A tiny job's calls may instead run `serial`ly on the calling thread: it
// sends every device's request (never waiting for a link to be made:
// WorkerConnector::OpenSmallIfUp), then reads the answers in the order
// they come in, watching the client and the workers every poll while it
// waits for them. (A send that waits for room on a busy link is not
// watched, here or elsewhere: no check can end that wait.)
// When every answer comes in whole (ShardChannel::Complete), it then does
// its usual part (`meanwhile`) itself: the job wakes no other thread. An
// answer still coming in when it is read hands that part and the watching
// to one pooled thread, which streams the outputs as they land. The job
// wakes one or two threads, not two per device, the largest cost of a
// tiny job on a busy coordinator.
//
// A two-phase job's calls keep their streams open after they return,
// until Finish sends them the commit decision.
//
// Run and Finish are called once each, in that order, from one thread.
// The destructor finishes (without committing) a fan-out not finished.
#ifndef SHARDMAP_SERVER_DEVICE_FANOUT_H_
#define SHARDMAP_SERVER_DEVICE_FANOUT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "core/change_signal.h"
#include "core/device_threads.h"
#include "server/job_results.h"
#include "server/shard_channel.h"
#include "server/worker_pool.h"

namespace shardmap {

class DeviceFanout {
 public:
  struct Options {
    absl::Duration liveness_poll = absl::Milliseconds(100);
    // Null: workers are not checked.
    std::function<absl::Status(const WorkerPool::Worker&)> check_live;
    // Keep each successful device's stream open for a commit decision.
    bool two_phase = false;
    // The job's messages are few and small: its calls may share streams
    // (WorkerConnector::OpenSmall).
    bool small = false;
    // Run the calls on the calling thread (see above).
    bool serial = false;
  };
  // One device's call over its stream, in two halves (SendShardCall and
  // ReceiveShardCall): `send` sends the device's request; `receive` reads
  // its answer, and is told what `send` returned (an error included: its
  // result is then the call's).
  struct Call {
    std::function<absl::StatusOr<bool>(int64_t device, ShardChannel&)> send;
    std::function<absl::StatusOr<DeviceResult>(
        int64_t device, const absl::StatusOr<bool>& sent, ShardChannel&)>
        receive;
  };

  // Device d runs on workers[d]; its stream is opened with `deadline`.
  // `threads`, `connector` and `workers` must outlive the fan-out.
  DeviceFanout(Options options, DeviceThreads* threads,
               WorkerConnector* connector,
               const std::vector<WorkerPool::Worker>& workers,
               absl::Time deadline);
  ~DeviceFanout();

  // Work of the job's own thread while its devices run. `watch` checks
  // the client and the workers once, as the fan-out does every
  // liveness_poll while it waits: a long wait in it should run `watch`
  // that often.
  using Meanwhile = std::function<void(const std::function<void()>& watch)>;

  // Runs `call` for every device, each on its own stream; returns once
  // every call has returned. `cancelled` (may be null) returning true
  // aborts every device. `meanwhile` (may be null) runs on this thread
  // once the calls have started; the fan-out's own watching (every
  // liveness_poll until the calls return) begins after it. Serial: the
  // calls run on this thread, and `meanwhile` after them, or, from the
  // first answer that is not in whole, `meanwhile` and the watching on a
  // pooled thread.
  void Run(const Call& call, const std::function<bool()>& cancelled,
           const Meanwhile& meanwhile = nullptr);
  // Per device: what its call returned.
  std::vector<absl::StatusOr<DeviceResult>>& results() { return results_; }
  // Per device: UNAVAILABLE from check_live if its worker was found lost
  // while the device ran, else OK.
  const std::vector<absl::Status>& lost() const { return lost_; }

  // Two-phase: sends `commit` to every device whose call succeeded and
  // ends its stream. Waits for every device's task. Returns each device's
  // final status (OK for a device that was not asked).
  std::vector<absl::Status> Finish(bool commit);

 private:
  // Cancels every open stream, and those opened later.
  void Abort();
  // Aborts if the client left or a running device's worker is lost.
  void CheckOnce(const std::function<bool()>& cancelled);
  // The calls, serially, and `meanwhile` (see Run).
  void RunSerially(const Call& call, const std::function<bool()>& cancelled,
                   const Meanwhile& meanwhile);
  // Starts the pooled thread that runs `meanwhile`, then watches until
  // every call returned (serial).
  void StartHelper(const std::function<bool()>& cancelled,
                   const Meanwhile& meanwhile);
  // Checks every liveness_poll until every call has returned.
  void WatchUntilReturned(const std::function<bool()>& cancelled);
  // Waits for the tasks Run started to end.
  void AwaitTasks();
  // Device d's call has returned.
  void Returned(int64_t d);
  // Opens device d's stream (OpenSmall for a small job, OpenSmallIfUp for
  // a serial one, whose streams notify readable_), where Abort reaches it,
  // and cancels it at once if the fan-out was aborted.
  std::unique_ptr<ShardChannel> OpenRegistered(int64_t d);
  // Device d's stream is going: Abort no longer reaches it.
  void Unregister(int64_t d);

  const Options options_;
  DeviceThreads* const threads_;      // Not owned.
  WorkerConnector* const connector_;  // Not owned.
  const std::vector<WorkerPool::Worker>& workers_;
  const absl::Time deadline_;
  const int64_t n_;

  std::vector<absl::StatusOr<DeviceResult>> results_;
  // Serial: notified when a device's stream may have an answer to read;
  // each device's stream, until it is finished (declared after the signal,
  // which they notify, so they go first).
  ChangeSignal readable_;
  std::vector<std::unique_ptr<ShardChannel>> serial_channels_;
  std::vector<absl::Status> lost_;
  std::vector<absl::Status> ended_;
  absl::Notification decided_;
  bool commit_ = false;  // written before `decided_` is notified

  absl::Mutex mu_;
  bool aborted_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<ShardChannel*> channels_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> returned_ ABSL_GUARDED_BY(mu_);  // per device
  int64_t done_ ABSL_GUARDED_BY(mu_) = 0;

  // Counts the device tasks that have ended (after the decision, if
  // two-phase). Shared with the tasks, so the last one may still be
  // leaving its lock when Finish returns and the fan-out goes away.
  struct Ended {
    absl::Mutex mu;
    int64_t tasks ABSL_GUARDED_BY(mu) = 0;
  };
  const std::shared_ptr<Ended> ended_tasks_ = std::make_shared<Ended>();
  int64_t started_ = 0;  // tasks Run started (this thread's only)
};

}  // namespace shardmap

#endif  // SHARDMAP_SERVER_DEVICE_FANOUT_H_
