// The worker's long-lived half of the shared-memory path: which peers it
// reaches through shared memory, and the channels to and from them.
//
// Sending side: before the first message to a peer address, SenderTo
// creates a ring and asks the peer to map it over gRPC (ShmPeer.Attach).
// The answer is kept: a channel while the peer keeps it mapped, or "use
// gRPC" for a peer on another host, one with --no-shm, one that could not
// map the ring, or one that does not serve ShmPeer. A failed call (the
// peer is unreachable, or stopped and silent until the call's deadline)
// holds for Options::attach_retry_after: until then sends to that address
// go over gRPC at once, so a job whose peer hangs is not held up by one
// Attach call per message; later sends ask again. (A call cut short by
// the caller's own deadline says nothing of the peer: no back-off.) A
// channel whose peer process is gone is dropped, and the next send asks
// the address again (a restarted worker gets a new channel).
//
// Receiving side: Attach, the ShmPeer handler, maps the ring when the
// sender's host identity equals ours, replacing any earlier channel from
// that address; ReceiverFrom hands it to the job transports.
//
// Single copy (when both have Options::single_copy): Attach also probes whether
// this process may read the sender's memory (ProbeSingleCopy); if so, the
// sender lends large messages (ShmSender::Lend) and the receiver copies them
// straight out of it. If not (EPERM: another user, Yama ptrace_scope 2 or 3, a
// seccomp filter; another pid namespace), it says so once in the log and the
// channel copies through the ring.
//
// Restarted peers: callers may name the process (incarnation) they expect
// at an address. A channel or "use gRPC" answer of another process is not
// used: SenderTo asks the address again, ReceiverFrom returns null until
// that process has attached.
//
// With `enabled` false (--no-shm) every peer is reached over gRPC, and
// Attach refuses; the worker still tells each peer once, so that a peer
// holding a channel from an earlier process at this address drops it.
//
// Thread-safe.
#ifndef SHARDMAP_WORKER_SHM_NETWORK_H_
#define SHARDMAP_WORKER_SHM_NETWORK_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "shardmap/v1/shm.grpc.pb.h"
#include "worker/transport/shm/cross_memory.h"
#include "worker/transport/shm/shm_receiver.h"
#include "worker/transport/shm/shm_sender.h"

namespace shardmap {

class ChannelCache;  // rpc/channel_cache.h
class ShmNetwork {
 public:
  struct Options {
    bool enabled = true;
    std::string my_address;       // what peers know this worker as
    uint64_t incarnation = 0;     // this process's start
    size_t ring_bytes = 4 << 20;  // per direction of each peer pair
    // What counts as "the same host"; LocalHostIdentity() if empty.
    std::string host_identity;
    // Offer single-copy transfers (the peer reads large messages straight
    // from this process's memory) and accept them from peers: both ends of
    // a channel must have it on (--shm-single-copy). Off by default: where
    // process_vm_readv pins pages slowly (measured in a VM: one such copy
    // costs about two memcpys, three when both peers read each other at
    // once) the ring's two copies are faster (docs/DESIGN.md).
    bool single_copy = false;
    // Reads peers' memory for single-copy transfers; null: the process's
    // ProcessVmReader. Not owned.
    CrossMemory* memory = nullptr;
    // How long an Attach call that failed keeps the address on gRPC.
    absl::Duration attach_retry_after = absl::Seconds(5);
  };
  // `channels` (for ShmPeer.Attach calls): not owned; outlives the
  // network.
  ShmNetwork(Options options, ChannelCache* channels);
  ~ShmNetwork();

  // Boot id, /dev/shm's device and inode, the IPC namespace's inode and
  // the effective uid, e.g. "boot=...;shm=35:1;ipc=4026531839;uid=0"; two
  // processes with equal identities can map each other's /dev/shm objects.
  // Empty if any part cannot be read (then shared memory is not used).
  static std::string LocalHostIdentity();

  bool enabled() const { return enabled_; }
  // Set before the worker registers (see PeerNetwork::set_my_address).
  void set_my_address(const std::string& address);

  // The channel to the worker at `address` (process `incarnation`; 0:
  // whichever), set up now if this is the first message to it (waiting at
  // most until `deadline`, and 2 s), or null when messages to it go over
  // gRPC.
  std::shared_ptr<ShmSender> SenderTo(const std::string& address,
                                      absl::Time deadline,
                                      uint64_t incarnation = 0);
  // The channel from the worker at `address` (process `incarnation`; 0:
  // whichever), or null.
  std::shared_ptr<ShmReceiver> ReceiverFrom(const std::string& address,
                                            uint64_t incarnation = 0);

  // The ShmPeer.Attach handler.
  v1::ShmAttachResponse Attach(const v1::ShmAttachRequest& request);

  // Drops the job's messages set aside by every receiver, and the
  // channels whose other process is gone.
  void ForgetJob(const std::string& job_id);

 private:
  struct Outgoing {
    std::shared_ptr<ShmSender> sender;
    bool use_grpc = false;
    uint64_t incarnation = 0;  // of the peer that answered; 0: unknown
    absl::Time retry_after = absl::InfinitePast();  // after a failed Attach
    std::shared_ptr<absl::Mutex> asking;            // one Attach call at a time
  };
  // Asks the peer to map a new ring. *keep: whether the answer holds for
  // later messages too. *incarnation: the answering peer's. *back_off:
  // the call failed in a way that says the peer cannot answer now.
  std::shared_ptr<ShmSender> Ask(const std::string& address,
                                 absl::Time deadline, bool* keep,
                                 uint64_t* incarnation, bool* back_off);

  // The sender's pid if single-copy reads from it work, else 0.
  pid_t SingleCopyFrom(const v1::ShmAttachRequest& request);

  ChannelCache* const channels_;
  const std::string identity_;
  const bool enabled_;         // options_.enabled, which never changes
  CrossMemory* const memory_;  // Not owned.
  absl::Mutex mu_;
  Options options_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Outgoing> out_ ABSL_GUARDED_BY(mu_);
  struct Incoming {
    std::shared_ptr<ShmReceiver> receiver;
    uint64_t incarnation = 0;  // of the sender
  };
  std::map<std::string, Incoming> in_ ABSL_GUARDED_BY(mu_);
};

// Serves ShmPeer.Attach from a ShmNetwork. Glue only.
class ShmPeerService final : public v1::ShmPeer::CallbackService {
 public:
  explicit ShmPeerService(ShmNetwork* network) : network_(network) {}
  grpc::ServerUnaryReactor* Attach(grpc::CallbackServerContext* context,
                                   const v1::ShmAttachRequest* request,
                                   v1::ShmAttachResponse* response) override;

 private:
  ShmNetwork* const network_;  // Not owned.
};

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_SHM_NETWORK_H_
