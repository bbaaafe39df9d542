// The peer transport over gRPC. PeerNetwork is the worker's long-lived
// half: the inbox every incoming stream feeds, and one outgoing PeerLink
// per peer address, opened on first use and reused across jobs.
// GrpcPeerTransport is the PeerTransport one device of one job uses.
#ifndef SHARDMAP_WORKER_GRPC_PEER_TRANSPORT_H_
#define SHARDMAP_WORKER_GRPC_PEER_TRANSPORT_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "shardmap/v1/peer.grpc.pb.h"
#include "worker/peer_inbox.h"
#include "worker/peer_link.h"
#include "worker/peer_transport.h"

namespace shardmap {

// Thread-safe.
class PeerNetwork {
 public:
  struct Options {
    std::string my_address;    // what peers know this worker as
    uint64_t incarnation = 0;  // this process's start
  };
  explicit PeerNetwork(const Options& options) : options_(options) {}
  ~PeerNetwork();  // shuts every link down

  PeerInbox* inbox() { return &inbox_; }
  // The address is known only once the server has bound its port; set it
  // before the worker registers (so before any job arrives).
  void set_my_address(const std::string& address);
  std::string my_address();
  // A live link to `address`, opened now if there is none or it broke.
  std::shared_ptr<PeerLink> Link(const std::string& address);

 private:
  struct Peer {
    std::unique_ptr<grpc::GenericStub> stub;
    std::shared_ptr<PeerLink> link;
  };
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
  absl::Status Send(int64_t to, const PeerMessage& message,
                    absl::Span<const uint8_t> data) override;
  absl::Status Recv(int64_t from, const PeerMessage& message,
                    absl::Span<uint8_t> out) override;

 private:
  PeerNetwork* const network_;  // Not owned.
  const Options options_;
};

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_GRPC_PEER_TRANSPORT_H_
