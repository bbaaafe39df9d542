// The PeerTransport of one device of one job over shared-memory channels:
// a ShmSender per device it sends to and a ShmReceiver per device it
// receives from, looked up through the functions in Options (the worker's
// ShmNetwork by peer address, or a test's table of channels between
// threads). RoutedPeerTransport uses SendVia and TakeVia for the peers it
// reaches through shared memory.
//
// Errors as PeerTransport documents: UNAVAILABLE naming the peer when its
// process is gone, DEADLINE_EXCEEDED naming the peer and the collective
// after the job's deadline or the per-collective timeout, INVALID_ARGUMENT
// with both fingerprints, the abort check's status.
//
// Thread-safe.
#ifndef SHARDMAP_WORKER_SHM_PEER_TRANSPORT_H_
#define SHARDMAP_WORKER_SHM_PEER_TRANSPORT_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "worker/transport/peer_transport.h"
#include "worker/transport/shm/shm_receiver.h"
#include "worker/transport/shm/shm_sender.h"

namespace shardmap {

class ShmPeerTransport final : public PeerTransport {
 public:
  struct Options {
    std::string job_id;
    int64_t device = 0;
    int64_t num_devices = 1;
    absl::Time deadline = absl::InfiniteFuture();  // the job's
    absl::Duration collective_timeout = absl::Seconds(30);
    std::function<absl::Status()> aborted = [] { return absl::OkStatus(); };
    // The channel to / from a device; null if there is none.
    std::function<std::shared_ptr<ShmSender>(int64_t to)> sender;
    std::function<std::shared_ptr<ShmReceiver>(int64_t from)> receiver;
  };
  explicit ShmPeerTransport(Options options) : options_(std::move(options)) {}
  // Withdraws what is still lent (a caller that forgot to Settle).
  ~ShmPeerTransport() override { Settle(/*abandon=*/true).IgnoreError(); }

  int64_t device() const override { return options_.device; }
  int64_t num_devices() const override { return options_.num_devices; }
  // FAILED_PRECONDITION if Options has no channel for the peer.
  absl::Status Send(int64_t to, const PeerMessage& message,
                    absl::Span<const uint8_t> data) override;
  absl::Status Recv(int64_t from, const PeerMessage& message,
                    absl::Span<uint8_t> out) override;

  absl::Status Lend(int64_t to, const PeerMessage& message,
                    absl::Span<const uint8_t> data) override;
  absl::Status Settle(bool abandon) override;

  absl::Status SendVia(ShmSender& sender, int64_t to,
                       const PeerMessage& message,
                       absl::Span<const uint8_t> data);
  // As SendVia, through ShmSender::Lend; Settle waits for the ticket.
  absl::Status LendVia(std::shared_ptr<ShmSender> sender, int64_t to,
                       const PeerMessage& message,
                       absl::Span<const uint8_t> data);
  // `idle` as ShmReceiver::Take.
  absl::Status TakeVia(ShmReceiver& receiver, int64_t from,
                       const PeerMessage& message, absl::Span<uint8_t> out,
                       const std::function<absl::Status()>& idle);

 private:
  absl::Status CheckPeer(int64_t peer, const PeerMessage& message,
                         const char* verb) const;

  // Send and Lend, through Options::sender.
  absl::Status Post(int64_t to, const PeerMessage& message,
                    absl::Span<const uint8_t> data, bool lend);
  // Sends through `sender`: Send, or Lend keeping the ticket.
  absl::Status SendThrough(const std::shared_ptr<ShmSender>& sender,
                           ShmSender& channel, bool lend, int64_t to,
                           const PeerMessage& message,
                           absl::Span<const uint8_t> data);

  const Options options_;
  struct Lent {
    std::shared_ptr<ShmSender> sender;
    std::vector<ShmLentTicket> tickets;
  };
  absl::Mutex mu_;
  std::map<ShmSender*, Lent> lent_ ABSL_GUARDED_BY(mu_);
};

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_SHM_PEER_TRANSPORT_H_
