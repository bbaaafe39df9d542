// What one device of a job needs from the other workers: a transport for
// its collectives, and reads of the resident blocks they hold. The worker
// reaches them over gRPC and shared memory (worker/grpc_job_peers.h);
// tests fake them.
#ifndef SHARDMAP_WORKER_JOB_PEERS_H_
#define SHARDMAP_WORKER_JOB_PEERS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "shardmap/v1/worker.pb.h"
#include "worker/transport/peer_transport.h"

namespace shardmap {

// Thread-safe.
class JobPeers {
 public:
  // How one device's collectives may wait.
  struct Link {
    absl::Time deadline;                    // the job's
    absl::Duration collective_timeout;      // longest wait for one message
    std::function<absl::Status()> aborted;  // non-OK ends every wait
  };

  virtual ~JobPeers() = default;
  // This worker process's incarnation (a job planned for another process
  // at this address is refused); 0: not checked.
  virtual uint64_t incarnation() const = 0;
  // The address the other workers know this one by ("" if none): blocks
  // held here are read locally.
  virtual std::string my_address() const = 0;
  // The transport of the device `header.device_id()` of the job `header`;
  // null if the job names no peers (it then runs without collectives).
  virtual std::unique_ptr<PeerTransport> Open(const v1::ShardJob& header,
                                              const Link& link) = 0;
  // Reads a sub-box of a block the worker at `address` holds. Errors name
  // the address.
  virtual absl::StatusOr<std::string> ReadBlock(
      const std::string& address, const v1::ReadBlockRequest& request,
      absl::Time deadline) = 0;
};

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_JOB_PEERS_H_
