// The Prometheus /metrics endpoint of a server (--metrics HOST:PORT): an
// HTTP listener serving the text exposition format of one registry.
#ifndef SHARDMAP_CORE_METRICS_ENDPOINT_H_
#define SHARDMAP_CORE_METRICS_ENDPOINT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace prometheus {
class Collectable;
class Exposer;
}  // namespace prometheus

namespace shardmap {

class MetricsEndpoint {
 public:
  // Listens on `address` (HOST:PORT; port 0 = any free port) and serves
  // `collectable` at /metrics, in plain HTTP without authentication.
  // Errors: FAILED_PRECONDITION for an address off loopback unless
  // `insecure` (--insecure; then a warning is logged); UNAVAILABLE naming
  // the address when it cannot listen.
  static absl::StatusOr<std::unique_ptr<MetricsEndpoint>> Start(
      const std::string& address,
      std::shared_ptr<prometheus::Collectable> collectable,
      bool insecure = false);
  ~MetricsEndpoint();

  // The HOST given to Start (0.0.0.0 stays 0.0.0.0) with the port actually
  // bound.
  const std::string& address() const { return address_; }

 private:
  MetricsEndpoint() = default;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::shared_ptr<prometheus::Collectable> collectable_;
  std::string address_;
};

}  // namespace shardmap

#endif  // SHARDMAP_CORE_METRICS_ENDPOINT_H_
