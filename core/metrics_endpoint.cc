#include "core/metrics_endpoint.h"

#include <prometheus/collectable.h>
#include <prometheus/exposer.h>

#include <exception>

#include "absl/strings/str_cat.h"
#include "core/channel.h"

namespace shardmap {

absl::StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(
    const std::string& address,
    std::shared_ptr<prometheus::Collectable> collectable) {
  std::unique_ptr<MetricsEndpoint> endpoint(new MetricsEndpoint());
  try {
    // One serving thread: scrapes are rare and small.
    endpoint->exposer_ = std::make_unique<prometheus::Exposer>(address, 1);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat(
        "--metrics: cannot serve metrics on ", address, ": ", e.what()));
  }
  endpoint->collectable_ = std::move(collectable);
  endpoint->exposer_->RegisterCollectable(endpoint->collectable_);
  const std::vector<int> ports = endpoint->exposer_->GetListeningPorts();
  endpoint->address_ = ReplacePort(address, ports.empty() ? 0 : ports[0]);
  return endpoint;
}

MetricsEndpoint::~MetricsEndpoint() = default;

}  // namespace shardmap
