// The sending half of the peer transport: one long-lived stream from this
// worker to one peer, over gRPC's callback API.
//
// Frames travel as raw byte buffers (worker/transport/grpc/peer_frame.h), so a
// payload is never copied through protobuf: it is either copied once into
// a slice or lent to gRPC as it is (worker/transport/grpc/lent_slices.h). They
// queue up and go out one write at a time (the next StartWrite is issued from
// OnWriteDone). The queue is bounded in bytes, so a peer that
// reads slowly slows its senders instead of growing their memory. A broken
// stream fails every queued and future frame with UNAVAILABLE; the owner
// then opens a new link.
//
//   OPEN --write fails / stream ends--> BROKEN --all ops done--> DONE
//     \--Shutdown()----------------------^
//
// Thread-safe. Create with Open; the link keeps itself alive until gRPC
// calls OnDone.
#ifndef SHARDMAP_WORKER_PEER_LINK_H_
#define SHARDMAP_WORKER_PEER_LINK_H_

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <deque>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "shardmap/v1/peer.pb.h"

namespace shardmap {

class PeerLink final
    : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  // Most bytes queued before Send waits.
  static constexpr size_t kMaxQueuedBytes = 8 << 20;

  // Starts the stream; its first frame says who is sending.
  static std::shared_ptr<PeerLink> Open(grpc::GenericStub* stub,
                                        const std::string& peer_address,
                                        const std::string& my_address,
                                        uint64_t incarnation);

  // Queues the frame `header` + `payload`, waiting while the queue is full,
  // at most until `deadline` and while `aborted` returns OK. The link holds
  // `payload` (a copy, or memory lent through LentSlices) until its write
  // completes or the stream breaks. Errors: UNAVAILABLE if the stream
  // broke, DEADLINE_EXCEEDED, or what `aborted` returned.
  absl::Status Send(const v1::PeerFrame& header, grpc::Slice payload,
                    absl::Time deadline,
                    const std::function<absl::Status()>& aborted);

  bool broken() const;
  // Frames gRPC has finished writing so far: a link whose count stands
  // still while frames wait is not being read.
  uint64_t writes_done() const;
  // Whether frames are being written or wait to be.
  bool pending() const;
  // Ends the stream; queued frames fail with UNAVAILABLE.
  void Shutdown();

  void OnWriteDone(bool ok) override;
  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

 private:
  explicit PeerLink(const std::string& peer_address);
  // Marks the link broken and fails the queue. Returns true exactly once:
  // then the caller must RemoveHold(), after releasing mu_.
  bool BreakLocked(absl::Status why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Queues an encoded frame; the caller made room for it.
  void EnqueueLocked(grpc::ByteBuffer frame, bool* start)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string peer_address_;
  grpc::ClientContext context_;
  grpc::ByteBuffer ack_;

  mutable absl::Mutex mu_;
  std::deque<grpc::ByteBuffer> queue_ ABSL_GUARDED_BY(mu_);
  size_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t writes_done_ ABSL_GUARDED_BY(mu_) = 0;
  grpc::ByteBuffer in_flight_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool hold_released_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status broken_ ABSL_GUARDED_BY(mu_);
  // Keeps the reactor alive until OnDone.
  std::shared_ptr<PeerLink> self_ ABSL_GUARDED_BY(mu_);
};

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_PEER_LINK_H_
