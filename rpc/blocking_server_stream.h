// A raw (byte-buffer) server stream on gRPC's callback API that one thread
// of the server's own reads and writes as if it were a synchronous stream:
// the call waits on no gRPC thread of its own, so a call waiting for its
// turn holds no thread, and whoever runs it later uses the stream through
// the same RawReader / RawWriter interfaces (rpc/chunk_message.h) as a
// synchronous handler's.
//
//  - Read blocks until the next message (read ahead by one while the owner
//    works on the last), or returns false at the end of the client's
//    messages, when the call broke or was cancelled, or past the wait
//    limit (SetWaitLimit).
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
#include <optional>

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

  // Starts reading the first message at once.
  BlockingServerStream();
  ~BlockingServerStream() override = default;

  bool Read(grpc::ByteBuffer* message) override;
  bool NextMessageSize(uint32_t* size) override;
  // False once the call broke.
  bool Write(const grpc::ByteBuffer& message,
             grpc::WriteOptions options) override;
  // Ends the call with `status` once every queued message is written (the
  // held last message leaves with the status).
  void FinishWhenWritten(const grpc::Status& status);
  // True once the client cancelled or went away, or the call was cancelled
  // for it (gRPC may end a Read before it says so).
  bool cancelled() const { return cancelled_.load(); }
  // Read and Write wait at most until `limit` (default: until the call
  // ends, which the owner must then bound, e.g. by cancelling it at its
  // deadline). Set it before the owner starts.
  void SetWaitLimit(absl::Time limit) { wait_limit_ = limit; }

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  grpc::ByteBuffer reading_;  // the read in flight's
  MuxInbox<grpc::ByteBuffer> inbox_;
  MuxOutbox<grpc::ByteBuffer> outbox_;
  // The message written as the last one, sent with the status.
  std::optional<grpc::ByteBuffer> last_;
  std::atomic<bool> cancelled_{false};
  absl::Time wait_limit_ = absl::InfiniteFuture();
};

}  // namespace shardmap

#endif  // SHARDMAP_RPC_BLOCKING_SERVER_STREAM_H_
