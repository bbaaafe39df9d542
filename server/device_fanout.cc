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

std::unique_ptr<ShardChannel> DeviceFanout::OpenRegistered(int64_t d) {
  // A serial call never waits for a link to be made: that wait would be
  // unwatched (the job's thread, which watches, is the one waiting).
  std::unique_ptr<ShardChannel> ch =
      options_.serial
          ? connector_->OpenSmallIfUp(workers_[d].address, deadline_)
      : options_.small ? connector_->OpenSmall(workers_[d].address, deadline_)
                       : connector_->Open(workers_[d].address, deadline_);
  if (options_.serial) ch->SetReadableSignal(&readable_);
  absl::MutexLock lock(&mu_);
  channels_[d] = ch.get();
  if (aborted_) ch->Cancel();
  return ch;
}

void DeviceFanout::Unregister(int64_t d) {
  absl::MutexLock lock(&mu_);
  channels_[d] = nullptr;
}

void DeviceFanout::WatchUntilReturned(const std::function<bool()>& cancelled) {
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

void DeviceFanout::Returned(int64_t d) {
  absl::MutexLock lock(&mu_);
  ++done_;
  returned_[d] = true;
}

void DeviceFanout::StartHelper(const std::function<bool()>& cancelled,
                               const Meanwhile& meanwhile) {
  const LogContext log_context = CurrentLogContext();
  started_ = 1;
  threads_->Run(
      [this, &cancelled, &meanwhile, log_context, ended = ended_tasks_] {
        ScopedLogContext in_thread(log_context);
        if (meanwhile) meanwhile([this, &cancelled] { CheckOnce(cancelled); });
        WatchUntilReturned(cancelled);
        absl::MutexLock lock(&ended->mu);  // last: the fan-out may go now
        ++ended->tasks;
      });
}

void DeviceFanout::RunSerially(const Call& call,
                               const std::function<bool()>& cancelled,
                               const Meanwhile& meanwhile) {
  serial_channels_.resize(n_);
  std::vector<absl::StatusOr<bool>> sent(n_, false);
  std::vector<int64_t> waiting;  // devices whose answer is still to read
  for (int64_t d = 0; d < n_; ++d) {
    serial_channels_[d] = OpenRegistered(d);
    ShardChannel& ch = *serial_channels_[d];
    sent[d] = call.send(d, ch);
    if (sent[d].ok() && *sent[d]) {
      waiting.push_back(d);
      continue;
    }
    // The call failed (or its stream broke) before its answer: it ends now,
    // and so does the job.
    results_[d] = call.receive(d, sent[d], ch);
    Abort();
    Returned(d);
  }
  // The answers are read as they come, so that the first device to fail
  // cancels the others at once. A cancelled stream is readable, so the
  // watching (this thread's every poll while it waits, or the helper's)
  // ends the wait of a job whose client left or whose worker stopped.
  while (!waiting.empty()) {
    const uint64_t seen = readable_.generation();
    const size_t before = waiting.size();
    for (auto it = waiting.begin(); it != waiting.end();) {
      const int64_t d = *it;
      if (!serial_channels_[d]->Readable()) {
        ++it;
        continue;
      }
      // An answer still coming in is read while the helper watches, and
      // streams the outputs that are in meanwhile.
      if (started_ == 0 && !serial_channels_[d]->Complete()) {
        StartHelper(cancelled, meanwhile);
      }
      results_[d] = call.receive(d, sent[d], *serial_channels_[d]);
      if (!results_[d].ok()) Abort();
      Returned(d);
      it = waiting.erase(it);
    }
    // Bounded: a stream is readable once its deadline passed, which no
    // signal tells, so the wait is repeated every poll.
    if (waiting.size() == before &&
        !readable_.WaitChanged(seen, absl::Now() + options_.liveness_poll) &&
        started_ == 0) {
      CheckOnce(cancelled);
    }
  }
  for (int64_t d = 0; d < n_; ++d) {
    // A two-phase job's streams stay for the decision.
    if (options_.two_phase && results_[d].ok()) continue;
    Unregister(d);
    serial_channels_[d].reset();
  }
  // Every answer came whole: the job's own work has it all, and runs here.
  if (started_ == 0 && meanwhile) {
    meanwhile([this, &cancelled] { CheckOnce(cancelled); });
  }
}

void DeviceFanout::Run(const Call& call, const std::function<bool()>& cancelled,
                       const Meanwhile& meanwhile) {
  const LogContext log_context = CurrentLogContext();
  if (options_.serial) {
    RunSerially(call, cancelled, meanwhile);
    AwaitTasks();
    return;
  }
  started_ = n_;
  for (int64_t d = 0; d < n_; ++d) {
    threads_->Run([this, &call, log_context, d, ended = ended_tasks_] {
      ScopedLogContext in_thread(log_context);  // logs and traceparent
      std::unique_ptr<ShardChannel> ch = OpenRegistered(d);
      results_[d] = call.receive(d, call.send(d, *ch), *ch);
      if (!results_[d].ok()) Abort();
      Returned(d);
      if (options_.two_phase && results_[d].ok()) {
        decided_.WaitForNotification();
        ended_[d] = SendDecision(*ch, commit_);
      }
      Unregister(d);
      ch.reset();  // before Finish may return, as a joined thread would
      absl::MutexLock lock(&ended->mu);  // last: the fan-out may go now
      ++ended->tasks;
    });
  }
  if (meanwhile) meanwhile([this, &cancelled] { CheckOnce(cancelled); });
  WatchUntilReturned(cancelled);
}

void DeviceFanout::AwaitTasks() {
  // As bounded as the calls: each ends by its stream's deadline.
  Ended& ended = *ended_tasks_;
  auto all_ended = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(ended.mu) {
    return ended.tasks == started_;
  };
  absl::MutexLock lock(&ended.mu);
  ended.mu.Await(absl::Condition(&all_ended));
}

std::vector<absl::Status> DeviceFanout::Finish(bool commit) {
  if (!serial_channels_.empty()) {
    // Every decision goes out before any answer is awaited.
    for (const auto& ch : serial_channels_) {
      if (ch != nullptr) static_cast<void>(WriteDecision(*ch, commit));
    }
    for (int64_t d = 0; d < n_; ++d) {
      if (serial_channels_[d] == nullptr) continue;
      ended_[d] = EndDecision(*serial_channels_[d]);
      Unregister(d);
      serial_channels_[d].reset();
    }
  }
  commit_ = commit;
  decided_.Notify();
  AwaitTasks();
  return ended_;
}

}  // namespace shardmap
