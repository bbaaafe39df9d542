// The peer transport over gRPC. PeerNetwork is the worker's long-lived
// half: the inbox every incoming stream feeds, and one outgoing PeerLink
// per peer address, opened on first use (on the worker's ChannelCache) and
// reused across jobs.
// GrpcPeerTransport is the PeerTransport one device of one job uses.
//
// Restarted peers: a job names the process (incarnation) it expects at
// each address. A link opened for another process of that address is shut
// down and a new one dialled on a new channel; a job that names a process the
// worker has since seen replaced (it was planned before the restart) fails with
// UNAVAILABLE instead of reaching the new process.
#ifndef SHARDMAP_WORKER_GRPC_PEER_TRANSPORT_H_
#define SHARDMAP_WORKER_GRPC_PEER_TRANSPORT_H_

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "shardmap/v1/peer.grpc.pb.h"
#include "worker/transport/grpc/lent_slices.h"
#include "worker/transport/grpc/peer_inbox.h"
#include "worker/transport/grpc/peer_link.h"
#include "worker/transport/peer_transport.h"

namespace shardmap {

class ChannelCache;  // rpc/channel_cache.h
// Thread-safe.
class PeerNetwork {
 public:
  struct Options {
    std::string my_address;    // what peers know this worker as
    uint64_t incarnation = 0;  // this process's start
  };
  // `channels`: not owned; outlives the network.
  PeerNetwork(const Options& options, ChannelCache* channels)
      : channels_(channels), options_(options) {}
  ~PeerNetwork();  // shuts every link down

  PeerInbox* inbox() { return &inbox_; }
  // The address is known only once the server has bound its port; set it
  // before the worker registers (so before any job arrives).
  void set_my_address(const std::string& address);
  std::string my_address();
  uint64_t incarnation();
  // A live link to the process `incarnation` (0: whichever) at `address`,
  // opened now if there is none, it broke, or it is to another process.
  // UNAVAILABLE if `incarnation` was replaced at that address.
  absl::StatusOr<std::shared_ptr<PeerLink>> Link(const std::string& address,
                                                 uint64_t incarnation = 0);
  // Shuts the link to `address` down and closes its connection (the next
  // Link dials afresh), so gRPC drops every frame it still holds for it.
  // With `only`, just if that is still the address's link.
  void Drop(const std::string& address, const PeerLink* only = nullptr);

 private:
  struct Peer {
    std::shared_ptr<grpc::Channel> channel;  // the link's
    std::unique_ptr<grpc::GenericStub> stub;
    std::shared_ptr<PeerLink> link;
    uint64_t incarnation = 0;       // the process the link is for; 0: unknown
    std::deque<uint64_t> replaced;  // earlier processes, newest last
  };
  ChannelCache* const channels_;
  PeerInbox inbox_;
  absl::Mutex mu_;
  Options options_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Peer> peers_ ABSL_GUARDED_BY(mu_);
};

// One device of one job. Thread-safe.
class GrpcPeerTransport final : public PeerTransport {
 public:
  struct Options {
    std::string job_id;
    int64_t device = 0;
    std::vector<std::string> addresses;  // peer address of each device
    // The process (incarnation) expected at each device's address; empty
    // or 0: not known.
    std::vector<uint64_t> incarnations;
    absl::Time deadline = absl::InfiniteFuture();  // the job's
    // Longest wait for one message: the progress watchdog that catches a
    // peer that is alive but stuck.
    absl::Duration collective_timeout = absl::Seconds(30);
    // Polled while waiting; non-OK stops the wait with that status.
    std::function<absl::Status()> aborted = [] { return absl::OkStatus(); };
  };
  GrpcPeerTransport(PeerNetwork* network, Options options);
  // Forgets the job's leftover messages.
  ~GrpcPeerTransport() override;

  int64_t device() const override { return options_.device; }
  int64_t num_devices() const override {
    return static_cast<int64_t>(options_.addresses.size());
  }
  // Copies `data` into gRPC's buffers.
  absl::Status Send(int64_t to, const PeerMessage& message,
                    absl::Span<const uint8_t> data) override;
  // Sends straight from `data` (lent to gRPC,
  // worker/transport/grpc/lent_slices.h), except to this device itself, which
  // is a copy.
  absl::Status Lend(int64_t to, const PeerMessage& message,
                    absl::Span<const uint8_t> data) override;
  // Lend: gRPC reads `data` only on its way to the socket.
  absl::Status LendUntilTaken(int64_t to, const PeerMessage& message,
                              absl::Span<const uint8_t> data) override {
    return Lend(to, message, data);
  }
  // Waits until gRPC released every buffer lent since the last Settle:
  // their bytes are in the kernel (or their stream failed). If that does
  // not happen in time (the per-collective timeout, the job's deadline, an
  // abort; with `abandon`, as long as the links keep writing, up to the
  // collective timeout; a link that stalls for 2 to 4 s is dropped), the links
  // the buffers went to are torn down (PeerNetwork::Drop), which makes gRPC
  // drop them, and Settle waits for that: after it returns gRPC never reads
  // them again. (Should gRPC still hold them 90 s after their connections
  // closed, the process stops with a critical log rather than let it read freed
  // memory.)
  // Errors: DEADLINE_EXCEEDED or the abort status (the links were dropped);
  // with `abandon` always OK.
  absl::Status Settle(bool abandon) override;
  absl::Status Recv(int64_t from, const PeerMessage& message,
                    absl::Span<uint8_t> out) override;
  // Hands the received slices to `consume` (PeerInbox::TakeChunks).
  absl::Status RecvChunks(int64_t from, const PeerMessage& message, size_t size,
                          const ChunkConsumer& consume) override;
  // The incarnation expected for device `d`; 0 if not known.
  uint64_t incarnation(int64_t d) const;
  // Lent slices gRPC still holds (a test hook: 0 after Settle).
  int64_t lent() const { return lent_.outstanding(); }

 private:
  // Send and Lend.
  absl::Status Post(int64_t to, const PeerMessage& message,
                    absl::Span<const uint8_t> data, bool lend);
  PeerInbox::Want WantOf(int64_t from, const PeerMessage& message) const;
  // The links buffers were lent to, by address (weak: a broken link must
  // be free to end its call, which lets go of the buffers).
  using LentLinks = std::map<std::string, std::weak_ptr<PeerLink>>;
  // Settle(abandon)'s wait; OK once every lent buffer is back.
  absl::Status AwaitReleasedWhileRead(const LentLinks& lent_to);
  // Cancels `weak`'s link, and drops the address's connection if that is
  // still its link.
  void DropLink(const std::string& address,
                const std::weak_ptr<PeerLink>& weak);

  PeerNetwork* const network_;  // Not owned.
  const Options options_;
  LentSlices lent_;
  absl::Mutex mu_;
  // Where buffers were lent since the last Settle, and on which links.
  LentLinks lent_to_ ABSL_GUARDED_BY(mu_);
};

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_GRPC_PEER_TRANSPORT_H_
