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
  // There is always a read in flight while this waits, and a cancelled or
  // broken call ends it, which ends the inbox: the wait ends with the call,
  // or at the wait limit (which then ends the reading).
  if (!inbox_.Pop(message, wait_limit_)) return false;
  // The next message is read while the owner works on this one.
  StartRead(&reading_);
  return true;
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
  if (ok) {
    inbox_.Push(std::move(reading_));
  } else {
    inbox_.End(absl::OkStatus());
  }
}

void BlockingServerStream::OnWriteDone(bool ok) { outbox_.WriteDone(ok); }

void BlockingServerStream::OnCancel() { cancelled_ = true; }

void BlockingServerStream::OnDone() { delete this; }

}  // namespace shardmap
