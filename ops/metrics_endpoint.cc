#include "ops/metrics_endpoint.h"

#include <prometheus/collectable.h>
#include <prometheus/exposer.h>
#include <spdlog/spdlog.h>

#include <exception>

#include "absl/strings/str_cat.h"
#include "rpc/credentials.h"

namespace shardmap {

absl::StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(
    const std::string& address,
    std::shared_ptr<prometheus::Collectable> collectable, bool insecure) {
  if (!IsLoopbackAddress(address)) {
    if (!insecure) {
      return absl::FailedPreconditionError(absl::StrCat(
          "--metrics: refusing to serve metrics on ", address,
          ", off loopback, in plain HTTP without authentication; use "
          "127.0.0.1:PORT, or pass --insecure to accept the risk"));
    }
    spdlog::warn(
        "--metrics {} is off loopback: anyone who can reach it can read the "
        "metrics (--insecure was given)",
        address);
  }
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
  const size_t colon = address.rfind(':');
  endpoint->address_ =
      absl::StrCat(colon == std::string::npos ? "" : address.substr(0, colon),
                   ":", ports.empty() ? 0 : ports[0]);
  return endpoint;
}

MetricsEndpoint::~MetricsEndpoint() = default;

}  // namespace shardmap
