#include "rpc/blocking_server_stream.h"

#include <limits>
#include <utility>

namespace shardmap {

BlockingServerStream::BlockingServerStream()
    : outbox_(kMaxQueuedBytes, [this](const grpc::ByteBuffer* message) {
        StartWrite(message);
      }) {
  StartRead(&reading_);
}

bool BlockingServerStream::Read(grpc::ByteBuffer* message) {
  // While this waits, a read is in flight or enough is queued, and a
  // cancelled or broken call ends the reading, which ends the inbox: the
  // wait ends with the call, or at the wait limit (which then ends the
  // inbox).
  if (!inbox_.Pop(message, wait_limit_)) return false;
  MaybeReadNext(message->Length());
  return true;
}

void BlockingServerStream::MaybeReadNext(size_t taken) {
  {
    absl::MutexLock lock(&mu_);
    unread_bytes_ -= taken;
    if (read_in_flight_ || reads_over_ || finishing_ ||
        unread_bytes_ >= kMaxReadAheadBytes) {
      return;
    }
    read_in_flight_ = true;
  }
  // Never under mu_: gRPC may run OnReadDone on this thread before
  // StartRead returns.
  StartRead(&reading_);
}

size_t BlockingServerStream::unread_bytes() {
  absl::MutexLock lock(&mu_);
  return unread_bytes_;
}

bool BlockingServerStream::reads_over() {
  absl::MutexLock lock(&mu_);
  return reads_over_;
}

void BlockingServerStream::CallWhenReadable(std::function<void()> fn) {
  {
    absl::MutexLock lock(&mu_);
    if (!readable_) {
      when_readable_ = std::move(fn);
      return;
    }
  }
  fn();
}

bool BlockingServerStream::NextMessageSize(uint32_t* size) {
  *size = std::numeric_limits<uint32_t>::max();  // no bound is known
  return !cancelled();
}

bool BlockingServerStream::Write(const grpc::ByteBuffer& message,
                                 grpc::WriteOptions options) {
  if (last_.has_value()) return false;  // nothing may follow the last one
  if (options.is_last_message()) {
    // Only its owner's thread writes; FinishWhenWritten reads it after the
    // outbox's lock hands over.
    last_ = message;
    return !cancelled();
  }
  // Waits while the queue is full: the write in flight ends, and with it the
  // wait, when the call does (or at the wait limit).
  return outbox_.Send(message, message.Length(), wait_limit_);
}

void BlockingServerStream::FinishWhenWritten(const grpc::Status& status) {
  {
    // No read starts after this one (a reaction that already chose to
    // start one may still: gRPC holds the call for a running reaction).
    absl::MutexLock lock(&mu_);
    finishing_ = true;
  }
  outbox_.Close(
      [this, status] {
        if (last_.has_value()) {
          StartWriteAndFinish(&*last_, grpc::WriteOptions(), status);
        } else {
          Finish(status);
        }
      },
      /*keep_queued=*/true);
}

void BlockingServerStream::OnReadDone(bool ok) {
  std::function<void()> readable;
  if (ok) {
    {
      absl::MutexLock lock(&mu_);
      unread_bytes_ += reading_.Length();
    }
    inbox_.Push(std::move(reading_));
  } else {
    inbox_.End(absl::OkStatus());
  }
  {
    // reading_ is free only now, after the push.
    absl::MutexLock lock(&mu_);
    read_in_flight_ = false;
    if (!ok) reads_over_ = true;
    if (!readable_) {
      readable_ = true;
      readable.swap(when_readable_);
    }
  }
  if (ok) MaybeReadNext(0);
  if (readable) readable();
}

void BlockingServerStream::OnWriteDone(bool ok) { outbox_.WriteDone(ok); }

void BlockingServerStream::OnCancel() { cancelled_ = true; }

void BlockingServerStream::OnDone() { delete this; }

}  // namespace shardmap
