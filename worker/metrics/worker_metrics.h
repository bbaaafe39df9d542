// The worker's Prometheus metrics (served with --metrics):
//   shardmap_collective_duration_seconds{op}   histogram per collective call
//   shardmap_peer_bytes_sent_total{peer}       payload bytes to a peer (gRPC
//                                              frames or shared memory)
//   shardmap_peer_bytes_received_total{peer}   ... and from a peer
//   shardmap_resident_bytes                    bytes of resident blocks held
//
// Process-wide, because the hooks sit deep in the communicator and the
// peer transport: each is one call, a no-op (one atomic load) until
// Enable. `peer` is the other worker's advertised HOST:PORT.
//
// Thread-safe.
#ifndef SHARDMAP_WORKER_WORKER_METRICS_H_
#define SHARDMAP_WORKER_WORKER_METRICS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace prometheus {
class Collectable;
}  // namespace prometheus

namespace shardmap::worker_metrics {

// Turns the metrics on; `resident_bytes` is read at every scrape. Returns
// what to serve. Call once, before any job.
std::shared_ptr<prometheus::Collectable> Enable(
    std::function<int64_t()> resident_bytes);

void PeerBytesSent(const std::string& peer, size_t bytes);
void PeerBytesReceived(const std::string& peer, size_t bytes);

// Times one collective call, from construction to destruction.
class CollectiveTimer {
 public:
  explicit CollectiveTimer(const char* op) : op_(op), start_(absl::Now()) {}
  ~CollectiveTimer();
  CollectiveTimer(const CollectiveTimer&) = delete;
  CollectiveTimer& operator=(const CollectiveTimer&) = delete;

 private:
  const char* const op_;
  const absl::Time start_;
};

}  // namespace shardmap::worker_metrics

#endif  // SHARDMAP_WORKER_WORKER_METRICS_H_
