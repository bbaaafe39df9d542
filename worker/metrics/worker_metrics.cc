#include "worker/metrics/worker_metrics.h"

#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>

#include <atomic>

namespace shardmap::worker_metrics {
namespace {

// 10 us to ~1 min: collectives range from a tiny psum to a large reshard.
prometheus::Histogram::BucketBoundaries CollectiveBuckets() {
  return {1e-5,   2.5e-5, 5e-5, 1e-4,  2.5e-4, 5e-4, 1e-3,
          2.5e-3, 5e-3,   0.01, 0.025, 0.05,   0.1,  0.25,
          0.5,    1,      2.5,  5,     10,     30,   60};
}

// The registry plus the resident-bytes gauge, computed at scrape time.
class Metrics final : public prometheus::Collectable {
 public:
  explicit Metrics(std::function<int64_t()> resident_bytes)
      : resident_bytes_(std::move(resident_bytes)),
        registry_(std::make_shared<prometheus::Registry>()),
        collectives_(prometheus::BuildHistogram()
                         .Name("shardmap_collective_duration_seconds")
                         .Help("Wall time of collective calls on this worker, "
                               "by jax.lax op")
                         .Register(*registry_)),
        sent_(prometheus::BuildCounter()
                  .Name("shardmap_peer_bytes_sent_total")
                  .Help("Array payload bytes queued for each peer worker")
                  .Register(*registry_)),
        received_(prometheus::BuildCounter()
                      .Name("shardmap_peer_bytes_received_total")
                      .Help("Array bytes received from each peer worker")
                      .Register(*registry_)) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    std::vector<prometheus::MetricFamily> out = registry_->Collect();
    prometheus::MetricFamily resident;
    resident.name = "shardmap_resident_bytes";
    resident.help = "Bytes of resident array blocks this worker holds";
    resident.type = prometheus::MetricType::Gauge;
    prometheus::ClientMetric m;
    m.gauge.value = static_cast<double>(resident_bytes_());
    resident.metric.push_back(std::move(m));
    out.push_back(std::move(resident));
    return out;
  }

  void Collective(const char* op, absl::Duration d) {
    collectives_.Add({{"op", op}}, CollectiveBuckets())
        .Observe(absl::ToDoubleSeconds(d));
  }
  void Sent(const std::string& peer, size_t n) {
    sent_.Add({{"peer", peer}}).Increment(static_cast<double>(n));
  }
  void Received(const std::string& peer, size_t n) {
    received_.Add({{"peer", peer}}).Increment(static_cast<double>(n));
  }

 private:
  const std::function<int64_t()> resident_bytes_;
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Histogram>& collectives_;
  prometheus::Family<prometheus::Counter>& sent_;
  prometheus::Family<prometheus::Counter>& received_;
};

// Set once by Enable and never freed: hooks may run on gRPC threads until
// the process exits.
std::atomic<Metrics*> g_metrics{nullptr};

}  // namespace

std::shared_ptr<prometheus::Collectable> Enable(
    std::function<int64_t()> resident_bytes) {
  auto metrics = std::make_shared<Metrics>(std::move(resident_bytes));
  // The shared_ptr the endpoint holds; a copy is leaked for the hooks.
  auto* kept = new std::shared_ptr<Metrics>(metrics);
  g_metrics.store(kept->get(), std::memory_order_release);
  return metrics;
}

void PeerBytesSent(const std::string& peer, size_t bytes) {
  if (Metrics* m = g_metrics.load(std::memory_order_acquire)) {
    m->Sent(peer, bytes);
  }
}

void PeerBytesReceived(const std::string& peer, size_t bytes) {
  if (Metrics* m = g_metrics.load(std::memory_order_acquire)) {
    m->Received(peer, bytes);
  }
}

CollectiveTimer::~CollectiveTimer() {
  if (Metrics* m = g_metrics.load(std::memory_order_acquire)) {
    m->Collective(op_, absl::Now() - start_);
  }
}

}  // namespace shardmap::worker_metrics
