// How the job runner talks to one worker about one device's part of a job,
// without knowing about gRPC: a bidirectional stream of ShardRequest out
// and ShardResponse in. The gRPC implementation is grpc_worker_connector.
#ifndef SHARDMAP_SERVER_SHARD_CHANNEL_H_
#define SHARDMAP_SERVER_SHARD_CHANNEL_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/change_signal.h"
#include "shardmap/v1/worker.pb.h"
#include "wire/chunk_stream.h"

namespace shardmap {

// One stream, started by the first Write. Not thread-safe, except Cancel,
// which any thread may call at any time, even before the first Write.
class ShardChannel {
 public:
  virtual ~ShardChannel() = default;
  // False if the stream broke; Finish then tells why.
  virtual bool Write(const v1::ShardRequest& request) = 0;
  virtual bool WritesDone() = 0;
  // Write and WritesDone in one.
  virtual bool WriteLast(const v1::ShardRequest& request) {
    return Write(request) && WritesDone();
  }
  // Write (or, if `last`, WriteLast) of a ShardRequest holding `chunk`. A
  // channel that can send memory by reference sends the chunk's bytes
  // without copying them, and keeps its owner until they are sent; this
  // one copies them.
  virtual bool WriteChunk(const LentChunk& chunk, bool last) {
    return WriteChunkCopy<v1::ShardRequest>(this, chunk, last);
  }
  // False at the end of the stream or when it broke.
  virtual bool Read(v1::ShardResponse* response) = 0;
  // Read for a reader that takes chunks without a copy: a chunk comes as
  // `*chunk`, any other message in `response` (and `*chunk` is reset). The
  // gRPC stream leaves a chunk's bytes where they arrived; this one moves
  // them out of the parsed message.
  virtual bool ReadChunked(v1::ShardResponse* response,
                           std::optional<ReceivedChunk>* chunk) {
    return ReadTakingChunk(this, response, chunk);
  }
  // For a caller that reads several channels as their answers come:
  // Readable says whether a Read would not wait long (a message or the
  // stream's end is in, or its deadline has passed), and once
  // SetReadableSignal was called (before the first Read; the signal must
  // outlive the channel) the channel notifies the signal whenever that may
  // have turned true, except at the deadline. A channel that cannot tell is
  // always readable (its Read then waits, up to the deadline).
  virtual bool Readable() { return true; }
  virtual void SetReadableSignal(ChangeSignal* signal) {}
  // Whether every message still to read is in, the stream's end with it,
  // so reading to the end waits for nothing. False unless the channel
  // knows.
  virtual bool Complete() { return false; }
  // The stream's final status. Call once, after Read returned false.
  virtual absl::Status Finish() = 0;
  virtual void Cancel() = 0;
};

// Opens streams to workers by address. Thread-safe.
class WorkerConnector {
 public:
  virtual ~WorkerConnector() = default;
  virtual std::unique_ptr<ShardChannel> Open(const std::string& address,
                                             absl::Time deadline) = 0;
  // Open, for a call whose messages are few and small (a small job): it
  // may share a long-lived stream with other calls instead of opening its
  // own.
  virtual std::unique_ptr<ShardChannel> OpenSmall(const std::string& address,
                                                  absl::Time deadline) {
    return Open(address, deadline);
  }
  // OpenSmall, for a call that must not wait for a shared stream to be
  // made: if none is up when the call starts, it opens its own instead.
  virtual std::unique_ptr<ShardChannel> OpenSmallIfUp(
      const std::string& address, absl::Time deadline) {
    return OpenSmall(address, deadline);
  }
  // Whether a channel OpenSmall makes now for a call that ends by
  // `deadline` would find its stream up (a serial fan-out runs only then),
  // and tell when it is readable (ShardChannel::Readable). False unless a
  // connector knows. A connector may start making the stream when it is
  // not up, so that later calls find it.
  virtual bool SmallReady(const std::string& address, absl::Time deadline) {
    return false;
  }
  // Tells the worker at `address` that the jobs of these tickets will not
  // come (Worker.SkipTickets). Errors: the call's.
  virtual absl::Status SkipTickets(const std::string& address,
                                   const v1::SkipTicketsRequest& request,
                                   absl::Time deadline) = 0;
  // Tells the worker at `address` to drop `version` of resident array
  // `name` (Worker.DropArray), or every version of it when `version` is 0:
  // what a job wrote but did not commit, or blocks a newer version
  // replaced. A worker that does not hold it does nothing. Errors: the
  // call's.
  virtual absl::Status DropVersion(const std::string& address,
                                   const std::string& name, uint64_t version,
                                   absl::Time deadline) = 0;
};

}  // namespace shardmap

#endif  // SHARDMAP_SERVER_SHARD_CHANNEL_H_
