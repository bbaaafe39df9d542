#include "server/device_fanout.h"

#include <utility>

#include "rpc/trace_context.h"
#include "server/shard_call.h"

namespace shardmap {

DeviceFanout::DeviceFanout(Options options, DeviceThreads* threads,
                           WorkerConnector* connector,
                           const std::vector<WorkerPool::Worker>& workers,
                           absl::Time deadline)
    : options_(std::move(options)),
      threads_(threads),
      connector_(connector),
      workers_(workers),
      deadline_(deadline),
      n_(static_cast<int64_t>(workers.size())),
      lost_(workers.size()),
      ended_(workers.size()),
      channels_(workers.size(), nullptr),
      returned_(workers.size(), false) {
  for (int64_t d = 0; d < n_; ++d) {
    results_.emplace_back(absl::UnknownError("not run"));
  }
}

DeviceFanout::~DeviceFanout() {
  if (!decided_.HasBeenNotified()) Finish(false);
}

void DeviceFanout::Abort() {
  absl::MutexLock lock(&mu_);
  aborted_ = true;
  for (ShardChannel* ch : channels_) {
    if (ch != nullptr) ch->Cancel();
  }
}

void DeviceFanout::CheckOnce(const std::function<bool()>& cancelled) {
  std::vector<bool> returned;
  {
    absl::MutexLock lock(&mu_);
    returned = returned_;
  }
  if (cancelled && cancelled()) Abort();  // the client left
  for (int64_t d = 0; options_.check_live && d < n_; ++d) {
    if (!lost_[d].ok() || returned[d]) continue;
    lost_[d] = options_.check_live(workers_[d]);
    if (!lost_[d].ok()) Abort();
  }
}

void DeviceFanout::Run(const Call& call, const std::function<bool()>& cancelled,
                       const Meanwhile& meanwhile) {
  const LogContext log_context = CurrentLogContext();
  started_ = n_;
  for (int64_t d = 0; d < n_; ++d) {
    threads_->Run([this, &call, log_context, d, ended = ended_tasks_] {
      ScopedLogContext in_thread(log_context);  // logs and traceparent
      std::unique_ptr<ShardChannel> ch =
          options_.small ? connector_->OpenSmall(workers_[d].address, deadline_)
                         : connector_->Open(workers_[d].address, deadline_);
      {
        absl::MutexLock lock(&mu_);
        channels_[d] = ch.get();
        if (aborted_) ch->Cancel();
      }
      results_[d] = call(d, *ch);
      if (!results_[d].ok()) Abort();
      {
        absl::MutexLock lock(&mu_);
        ++done_;
        returned_[d] = true;
      }
      if (options_.two_phase && results_[d].ok()) {
        decided_.WaitForNotification();
        ended_[d] = SendDecision(*ch, commit_);
      }
      {
        absl::MutexLock lock(&mu_);
        channels_[d] = nullptr;
      }
      ch.reset();  // before Finish may return, as a joined thread would
      absl::MutexLock lock(&ended->mu);  // last: the fan-out may go now
      ++ended->tasks;
    });
  }
  if (meanwhile) meanwhile([this, &cancelled] { CheckOnce(cancelled); });
  auto all_done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return done_ == n_;
  };
  mu_.Lock();
  while (!mu_.AwaitWithTimeout(absl::Condition(&all_done),
                               options_.liveness_poll)) {
    mu_.Unlock();
    CheckOnce(cancelled);
    mu_.Lock();
  }
  mu_.Unlock();
}

std::vector<absl::Status> DeviceFanout::Finish(bool commit) {
  commit_ = commit;
  decided_.Notify();
  // As bounded as the calls: each ends by its stream's deadline.
  Ended& ended = *ended_tasks_;
  auto all_ended = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(ended.mu) {
    return ended.tasks == started_;
  };
  absl::MutexLock lock(&ended.mu);
  ended.mu.Await(absl::Condition(&all_ended));
  return ended_;
}

}  // namespace shardmap
