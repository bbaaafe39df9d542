// A PeerTransport whose devices are threads of one process, for tests of
// the collective algorithms (the way gloo's tests run ranks as threads).
//
// An InMemoryHub holds one mailbox per device of one job. Each device talks
// through its own InMemoryPeerTransport, made by hub.Endpoint(device):
//
//   InMemoryHub hub(/*num_devices=*/4, /*recv_timeout=*/absl::Seconds(2));
//   std::unique_ptr<InMemoryPeerTransport> t0 = hub.Endpoint(0);
//
// Send copies the payload into the receiver's mailbox, keyed by
// (sender, seq, step), together with the sender's fingerprint, and returns
// at once: mailboxes are unbounded, so Send never blocks. Recv waits for its
// key, at most the hub's recv_timeout, then checks the fingerprint and the
// size. hub.Abort(status) fails every pending and future Send and Recv with
// that status, the way a job abort releases collectives blocked on peers.
//
// With the environment variable SHARDMAP_TEST_PEER_TRANSPORT=shm the hub
// carries the same messages over shared-memory channels instead (one
// ShmRing of kShmTestRingBytes per ordered pair of devices, made on first
// use, through ShmSender and ShmReceiver): the collective tests then run
// unchanged over the transport co-located workers use. Sends then stream
// through the ring (spilling when the receiver is not reading), lent
// messages of any size (Lend) are read straight from the sender's buffer
// (process_vm_readv on this process), and duplicates are not detected.
//
// Thread-safe: the hub and every endpoint may be used from any number of
// threads at once. The hub must outlive its endpoints. Endpoint(device)
// requires device in [0, num_devices); Send and Recv of an endpoint outside
// that range fail with INVALID_ARGUMENT.
#ifndef SHARDMAP_WORKER_IN_MEMORY_PEER_TRANSPORT_H_
#define SHARDMAP_WORKER_IN_MEMORY_PEER_TRANSPORT_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "worker/transport/peer_transport.h"

namespace shardmap {

class InMemoryPeerTransport;
class ShmPeerTransport;
class ShmReceiver;
class ShmSender;

class InMemoryHub {
 public:
  // Mailboxes for devices 0 .. num_devices - 1 (num_devices >= 1). A Recv
  // that waits longer than `recv_timeout` fails with DEADLINE_EXCEEDED.
  explicit InMemoryHub(int64_t num_devices,
                       absl::Duration recv_timeout = absl::Seconds(10));
  // Small, so that test messages wrap around the ring many times.
  static constexpr size_t kShmTestRingBytes = 64 << 10;
  // Whether this process's hubs use shared memory (see above).
  static bool UsesSharedMemory();
  ~InMemoryHub();
  InMemoryHub(const InMemoryHub&) = delete;
  InMemoryHub& operator=(const InMemoryHub&) = delete;

  int64_t num_devices() const { return num_devices_; }

  // The transport of `device`, which must be in [0, num_devices). Several
  // endpoints of one device share its mailbox.
  std::unique_ptr<InMemoryPeerTransport> Endpoint(int64_t device);

  // Every pending and future Send and Recv returns `status` (ABORTED if
  // `status` is OK). The first abort wins; later calls change nothing.
  void Abort(const absl::Status& status);

  // Messages sent but not yet received, over all mailboxes. Zero after a
  // collective that every rank finished: a leftover means the ranks
  // disagreed on the messages to exchange.
  size_t PendingMessages() const;

  // Recv calls now waiting for their message, past their first abort
  // check. A test hook: once it counts a Recv, an Abort must release it.
  int64_t WaitingReceivers() const { return waiting_receivers_.load(); }

 private:
  friend class InMemoryPeerTransport;
  struct Mailbox;
  struct ShmPair;

  absl::Status Send(int64_t from, int64_t to, const PeerMessage& message,
                    absl::Span<const uint8_t> data);
  absl::Status Recv(int64_t to, int64_t from, const PeerMessage& message,
                    absl::Span<uint8_t> out);
  absl::Status Lend(int64_t from, int64_t to, const PeerMessage& message,
                    absl::Span<const uint8_t> data);
  absl::Status Settle(int64_t device, bool abandon);

  const int64_t num_devices_;
  const absl::Duration recv_timeout_;
  std::vector<std::unique_ptr<Mailbox>> mailboxes_;  // by receiving device
  absl::Mutex abort_mu_;  // serializes Abort; each Mailbox has its own mutex
  std::atomic<int64_t> waiting_receivers_{0};

  // The shared-memory mode: channels by [from * num_devices + to], made on
  // first use, and each device's transport over them.
  ShmPair& PairOf(int64_t from, int64_t to);
  absl::Status AbortStatus() const;
  const bool shm_;
  mutable absl::Mutex shm_mu_;
  std::vector<std::unique_ptr<ShmPair>> pairs_ ABSL_GUARDED_BY(shm_mu_);
  std::vector<std::unique_ptr<ShmPeerTransport>> shm_endpoints_;
  absl::Status abort_status_ ABSL_GUARDED_BY(shm_mu_);
};

// One device's view of an InMemoryHub. Errors as PeerTransport documents,
// plus INVALID_ARGUMENT for a peer outside the mesh and INTERNAL for a
// second message with the same (sender, seq, step) while the first is
// still unreceived.
class InMemoryPeerTransport : public PeerTransport {
 public:
  InMemoryPeerTransport(InMemoryHub* hub, int64_t device)
      : hub_(hub), device_(device) {}

  int64_t device() const override { return device_; }
  int64_t num_devices() const override { return hub_->num_devices(); }

  absl::Status Send(int64_t to, const PeerMessage& message,
                    absl::Span<const uint8_t> data) override;
  absl::Status Recv(int64_t from, const PeerMessage& message,
                    absl::Span<uint8_t> out) override;
  absl::Status Lend(int64_t to, const PeerMessage& message,
                    absl::Span<const uint8_t> data) override;
  absl::Status Settle(bool abandon) override;

 private:
  InMemoryHub* const hub_;  // Not owned.
  const int64_t device_;
};

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_IN_MEMORY_PEER_TRANSPORT_H_
