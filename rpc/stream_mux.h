// The two halves of a stream that carries many calls at once (a
// multiplexed stream on gRPC's callback API), without gRPC: MuxOutbox
// queues the messages every call sends and hands them to the stream one
// at a time, as a callback reactor must; MuxInbox holds one call's
// received messages until the call's thread takes them. Both ends of
// Worker.RunShards (server/shard_link.h, worker/shard_link_service.h) use
// them, and so does a single callback call read and written by one thread
// (rpc/blocking_server_stream.h).
//
// Thread-safe: any thread sends, pops, ends or closes.
#ifndef SHARDMAP_RPC_STREAM_MUX_H_
#define SHARDMAP_RPC_STREAM_MUX_H_

#include <cstddef>
#include <deque>
#include <functional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/change_signal.h"

namespace shardmap {

template <typename Out>
class MuxOutbox {
 public:
  // `start_write` begins writing one message (a reactor's StartWrite); the
  // message stays alive, unmoved, until WriteDone. It is never called with
  // the outbox's lock held, and never again before WriteDone.
  MuxOutbox(size_t max_queued_bytes,
            std::function<void(const Out*)> start_write)
      : max_queued_bytes_(max_queued_bytes),
        start_write_(std::move(start_write)) {}

  // Queues `message` (`bytes` long). Unless `urgent`, first waits while
  // more than max_queued_bytes are queued, so a call that sends much is
  // held back rather than buffered. False, with nothing queued, once the
  // outbox is closed or when `deadline` passes first.
  bool Send(Out message, size_t bytes, absl::Time deadline,
            bool urgent = false) {
    const Out* first = nullptr;
    {
      absl::MutexLock lock(&mu_);
      auto room = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
        return closed_ || queued_bytes_ <= max_queued_bytes_;
      };
      if (!urgent) mu_.AwaitWithDeadline(absl::Condition(&room), deadline);
      if (closed_ || (!urgent && !room())) return false;
      queue_.emplace_back(std::move(message), bytes);
      queued_bytes_ += bytes;
      if (!writing_) {
        writing_ = true;
        first = &queue_.front().first;
      }
    }
    if (first != nullptr) start_write_(first);
    return true;
  }

  // The stream finished writing the front message; `ok` false: the stream
  // broke, and the outbox closes.
  void WriteDone(bool ok) {
    const Out* next = nullptr;
    std::function<void()> drained;
    {
      absl::MutexLock lock(&mu_);
      queued_bytes_ -= queue_.front().second;
      queue_.pop_front();
      if (!ok) {  // nothing is in flight now: drop all
        closed_ = true;
        queue_.clear();
        queued_bytes_ = 0;
      }
      if (!queue_.empty()) {
        next = &queue_.front().first;
      } else {
        writing_ = false;
        if (closed_) drained.swap(drained_);
      }
    }
    if (next != nullptr) start_write_(next);
    if (drained) drained();
  }

  // Sends fail from now on. What is queued and not being written is
  // dropped, or with `keep_queued` still written. `drained` (if not null,
  // and only on the first Close that passes one) is called once nothing is
  // left to write: at once, or from the WriteDone of the last write.
  void Close(std::function<void()> drained = nullptr,
             bool keep_queued = false) {
    {
      absl::MutexLock lock(&mu_);
      closed_ = true;
      if (!keep_queued) DropQueuedLocked();
      if (!drained || drain_asked_) return;
      drain_asked_ = true;
      if (writing_) {
        drained_ = std::move(drained);
        return;
      }
    }
    drained();
  }

 private:
  void DropQueuedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    // The front message may be in the stream's hands; keep it until its
    // WriteDone.
    while (queue_.size() > (writing_ ? 1u : 0u)) {
      queued_bytes_ -= queue_.back().second;
      queue_.pop_back();
    }
  }

  const size_t max_queued_bytes_;
  const std::function<void(const Out*)> start_write_;
  absl::Mutex mu_;
  std::deque<std::pair<Out, size_t>> queue_ ABSL_GUARDED_BY(mu_);
  size_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool drain_asked_ ABSL_GUARDED_BY(mu_) = false;
  std::function<void()> drained_ ABSL_GUARDED_BY(mu_);
};

template <typename In>
class MuxInbox {
 public:
  // Adds a message, unless the inbox has ended.
  void Push(In message) {
    absl::MutexLock lock(&mu_);
    if (!ended_) queue_.push_back(std::move(message));
    if (signal_ != nullptr) signal_->Notify();
  }

  // Push, then End with `status`, at once: a reader never sees the
  // message without the end (ShardChannel::Complete).
  void PushLast(In message, absl::Status status) {
    absl::MutexLock lock(&mu_);
    if (ended_) return;
    queue_.push_back(std::move(message));
    ended_ = true;
    status_ = std::move(status);
    if (signal_ != nullptr) signal_->Notify();
  }

  // No message follows those pushed; `status` is the call's end (the
  // first End counts). With `drop`, messages not yet popped go too.
  void End(absl::Status status, bool drop = false) {
    absl::MutexLock lock(&mu_);
    if (drop) queue_.clear();
    if (ended_) return;
    ended_ = true;
    status_ = std::move(status);
    if (signal_ != nullptr) signal_->Notify();
  }

  // The next message, waiting up to `deadline`. False at the end (then
  // status() tells why) or when the deadline passed first (then, with
  // `end_at_deadline`, the inbox ends with DEADLINE_EXCEEDED).
  bool Pop(In* message, absl::Time deadline, bool end_at_deadline = true) {
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithDeadline(absl::Condition(this, &MuxInbox::ReadyLocked),
                          deadline);
    if (!queue_.empty()) {
      *message = std::move(queue_.front());
      queue_.pop_front();
      return true;
    }
    if (!ended_ && end_at_deadline) {
      ended_ = true;
      status_ = absl::DeadlineExceededError(
          "the call's deadline passed before its answer came");
    }
    return false;
  }

  // Whether Pop would not wait.
  bool ready() {
    absl::MutexLock lock(&mu_);
    return ReadyLocked();
  }
  // `signal` (if not null) is notified after every Push and the End,
  // from the thread that called them. It must outlive the inbox, or the
  // next call here.
  void SetSignal(ChangeSignal* signal) {
    absl::MutexLock lock(&mu_);
    signal_ = signal;
  }
  bool ended() {
    absl::MutexLock lock(&mu_);
    return ended_;
  }
  // OK until the inbox ended; then the status it ended with.
  absl::Status status() {
    absl::MutexLock lock(&mu_);
    return status_;
  }

 private:
  bool ReadyLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return ended_ || !queue_.empty();
  }

  absl::Mutex mu_;
  std::deque<In> queue_ ABSL_GUARDED_BY(mu_);
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  ChangeSignal* signal_ ABSL_GUARDED_BY(mu_) = nullptr;
};

}  // namespace shardmap

#endif  // SHARDMAP_RPC_STREAM_MUX_H_
