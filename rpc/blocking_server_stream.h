// A raw (byte-buffer) server stream on gRPC's callback API that one thread
// of the server's own reads and writes as if it were a synchronous stream:
// the call waits on no gRPC thread of its own, so a call waiting for its
// turn holds no thread, and whoever runs it later uses the stream through
// the same RawReader / RawWriter interfaces (rpc/chunk_message.h) as a
// synchronous handler's.
//
//  - Read blocks until the next message, or returns false at the end of
//    the client's messages, when the call broke or was cancelled, or past
//    the wait limit (SetWaitLimit). The first message is read at once;
//    once the owner engages the call (its first Read, or
//    CallWhenReadable), the next ones are read ahead, each started from
//    the reaction that took the last (no thread hand-off per message),
//    while less than kMaxReadAheadBytes wait unread; Read resumes the
//    reading once they drop below that. So a small call's messages and
//    its half-close are all in by the time its owner looks, a call not
//    yet engaged (one waiting for its turn) holds its first message only,
//    and a large upload goes at the owner's pace.
//  - CallWhenReadable(fn) calls fn once the first message or the end of
//    the messages is in: the owner can start then, instead of waiting on
//    a thread for the call's first bytes.
//  - Write queues the message (waiting while 4 MiB are queued, at most
//    until the wait limit) and returns: true once queued, so a client that
//    went away is noticed a write later than on a synchronous stream. The
//    messages go out one at a time. A message written as the last one
//    (WriteOptions::set_last_message) is held and leaves with the status;
//    a Write after it fails.
//  - FinishWhenWritten(status) ends the call once the queue is written:
//    called once, by the owner, as the last thing it does with the stream.
//
// The reactor deletes itself when gRPC is done with the call (OnDone), so
// nothing may touch it after FinishWhenWritten. Subclasses add what the call
// needs (RunJob: server/run_job_call.h) and may extend OnCancel.
//
// Thread-safe as a synchronous stream is: one reader and one writer at a
// time; cancelled() from any thread.
#ifndef SHARDMAP_RPC_BLOCKING_SERVER_STREAM_H_
#define SHARDMAP_RPC_BLOCKING_SERVER_STREAM_H_

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/server_callback.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "rpc/chunk_message.h"
#include "rpc/stream_mux.h"

namespace shardmap {

class BlockingServerStream
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>,
      public RawReader,
      public RawWriter {
 public:
  // Most bytes queued before Write waits.
  static constexpr size_t kMaxQueuedBytes = 4 << 20;
  // Read ahead stops while at least this many bytes wait unread.
  static constexpr size_t kMaxReadAheadBytes = 64 << 10;

  // Starts reading the first message at once.
  BlockingServerStream();
  ~BlockingServerStream() override = default;

  bool Read(grpc::ByteBuffer* message) override ABSL_LOCKS_EXCLUDED(mu_);
  // Engages the call (see above) and calls `fn` once, when the first
  // message or the end of the messages is in: at once, on this thread, if
  // it is already; else on the gRPC thread that takes it (so `fn` must
  // not block). At most once per call.
  void CallWhenReadable(std::function<void()> fn) ABSL_LOCKS_EXCLUDED(mu_);
  bool NextMessageSize(uint32_t* size) override;
  // False once the call broke.
  bool Write(const grpc::ByteBuffer& message,
             grpc::WriteOptions options) override;
  // Ends the call with `status` once every queued message is written (the
  // held last message leaves with the status).
  void FinishWhenWritten(const grpc::Status& status) ABSL_LOCKS_EXCLUDED(mu_);
  // True once the client cancelled or went away, or the call was cancelled
  // for it (gRPC may end a Read before it says so).
  bool cancelled() const { return cancelled_.load(); }
  // Read and Write wait at most until `limit` (default: until the call
  // ends, which the owner must then bound, e.g. by cancelling it at its
  // deadline). Set it before the owner starts.
  void SetWaitLimit(absl::Time limit) { wait_limit_ = limit; }
  // For tests: what the read-ahead holds, bytes read and not yet taken by
  // Read, and whether the reading is over (the client's half-close, or
  // the call's end, is in).
  size_t unread_bytes() const ABSL_LOCKS_EXCLUDED(mu_);
  bool reads_over() const ABSL_LOCKS_EXCLUDED(mu_);

  void OnReadDone(bool ok) override ABSL_LOCKS_EXCLUDED(mu_);
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  // Starts the next read once the owner engaged the call (`engage`: it
  // does so now), unless one is in flight, the reads or the inbox ended,
  // the call is finishing, or enough waits unread; `taken` bytes were
  // just read by the owner (0 from the reactions).
  void MaybeReadNext(size_t taken, bool engage) ABSL_LOCKS_EXCLUDED(mu_);

  // The read in flight's: gRPC's while read_in_flight_; whoever sets that
  // flag starts the read.
  grpc::ByteBuffer reading_;
  MuxInbox<grpc::ByteBuffer> inbox_;
  mutable absl::Mutex mu_;
  size_t unread_bytes_ ABSL_GUARDED_BY(mu_) = 0;     // pushed, not yet Read
  bool read_in_flight_ ABSL_GUARDED_BY(mu_) = true;  // the constructor's
  bool engaged_ ABSL_GUARDED_BY(mu_) = false;
  bool reads_over_ ABSL_GUARDED_BY(mu_) = false;
  bool finishing_ ABSL_GUARDED_BY(mu_) = false;
  bool readable_ ABSL_GUARDED_BY(mu_) = false;
  std::function<void()> when_readable_ ABSL_GUARDED_BY(mu_);
  MuxOutbox<grpc::ByteBuffer> outbox_;
  // The message written as the last one, sent with the status.
  std::optional<grpc::ByteBuffer> last_;
  std::atomic<bool> cancelled_{false};
  absl::Time wait_limit_ = absl::InfiniteFuture();
};

}  // namespace shardmap

#endif  // SHARDMAP_RPC_BLOCKING_SERVER_STREAM_H_
