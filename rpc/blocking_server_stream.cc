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
  // Pop waits only on an empty inbox, and then a read is in flight (the
  // reading pauses only while enough is queued, and an owner that reads
  // has engaged it); a cancelled or broken call ends that read and the
  // inbox with it, or the wait limit ends the inbox.
  if (!inbox_.Pop(message, wait_limit_)) return false;
  MaybeReadNext(message->Length(), /*engage=*/true);
  return true;
}

void BlockingServerStream::MaybeReadNext(size_t taken, bool engage) {
  // An inbox that ended (the wait limit passed, or the reads are over)
  // takes nothing more.
  const bool ended = inbox_.ended();
  {
    absl::MutexLock lock(&mu_);
    unread_bytes_ -= taken;
    if (engage) engaged_ = true;
    if (!engaged_ || ended || read_in_flight_ || reads_over_ || finishing_ ||
        unread_bytes_ >= kMaxReadAheadBytes) {
      return;
    }
    read_in_flight_ = true;
  }
  // Never under mu_: gRPC may run OnReadDone on this thread before
  // StartRead returns.
  StartRead(&reading_);
}

size_t BlockingServerStream::unread_bytes() const {
  absl::MutexLock lock(&mu_);
  return unread_bytes_;
}

bool BlockingServerStream::reads_over() const {
  absl::MutexLock lock(&mu_);
  return reads_over_;
}

void BlockingServerStream::CallWhenReadable(std::function<void()> fn) {
  bool now = false;
  {
    absl::MutexLock lock(&mu_);
    if (readable_) {
      now = true;
    } else {
      when_readable_ = std::move(fn);
    }
  }
  MaybeReadNext(0, /*engage=*/true);
  if (now) fn();
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
    // No read starts after this (a reaction that already chose to start
    // one may still: gRPC holds the call for the running reaction, and
    // that read ends, false, before OnDone).
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
  {
    // One step under mu_ (the inbox's own lock is only ever taken inside
    // it): the message is counted and queued, and only then is reading_
    // free for the next read.
    absl::MutexLock lock(&mu_);
    if (ok) {
      unread_bytes_ += reading_.Length();
      inbox_.Push(std::move(reading_));
    } else {
      inbox_.End(absl::OkStatus());
      reads_over_ = true;
    }
    read_in_flight_ = false;
    if (!readable_) {
      readable_ = true;
      readable.swap(when_readable_);
    }
  }
  if (ok) MaybeReadNext(0, /*engage=*/false);
  if (readable) readable();
}

void BlockingServerStream::OnWriteDone(bool ok) { outbox_.WriteDone(ok); }

void BlockingServerStream::OnCancel() { cancelled_ = true; }

void BlockingServerStream::OnDone() { delete this; }

}  // namespace shardmap
