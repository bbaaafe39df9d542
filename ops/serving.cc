#include "ops/serving.h"

#include <chrono>
#include <iostream>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/status_util.h"
#include "rpc/channel.h"
#include "rpc/credentials.h"

namespace shardmap {
namespace {
// The payload type URL of a status's exit code.
constexpr char kExitCodeKey[] = "shardmap-exit-code";
}  // namespace

absl::Status WithExitCode(absl::Status status, int code) {
  status.SetPayload(kExitCodeKey, absl::Cord(std::to_string(code)));
  return status;
}

int ExitCodeOf(const absl::Status& status) {
  if (status.ok()) return kExitOk;
  auto payload = status.GetPayload(kExitCodeKey);
  int code = 0;
  if (!payload.has_value() || !absl::SimpleAtoi(std::string(*payload), &code)) {
    return kExitSoftware;
  }
  return code;
}

int ReportStartupError(const absl::Status& status) {
  std::cerr << "error: " << StatusCodeName(status.code()) << ": "
            << status.message() << std::endl;
  return ExitCodeOf(status);
}

absl::StatusOr<std::unique_ptr<MetricsEndpoint>> StartMetricsIfAsked(
    const std::string& address,
    std::shared_ptr<prometheus::Collectable> registry, bool insecure) {
  if (address.empty()) return nullptr;
  auto started = MetricsEndpoint::Start(address, std::move(registry), insecure);
  if (!started.ok()) {
    return WithExitCode(started.status(),
                        absl::IsFailedPrecondition(started.status())
                            ? kExitConfig
                            : kExitUnavailable);
  }
  return started;
}

absl::StatusOr<std::unique_ptr<Serving>> Serving::Start(
    const Options& options) {
  std::unique_ptr<Serving> serving(new Serving());
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(options.listen,
                           options.credentials
                               ? options.credentials
                               : grpc::InsecureServerCredentials(),
                           &port);
  ConfigureServerBuilder(builder);
  if (options.register_services) options.register_services(builder);
  serving->server_ = builder.BuildAndStart();
  if (!serving->server_ || port == 0) {
    serving->shut_down_ = true;  // nothing to shut down
    return WithExitCode(absl::UnavailableError(
                            absl::StrCat("cannot listen on ", options.listen)),
                        kExitUnavailable);
  }
  serving->address_ = ReplacePort(options.listen, port);
  serving->health_ =
      std::make_unique<HealthFanout>(serving->server_->GetHealthCheckService());
  auto health_port =
      HealthPort::StartIfAsked(options.health_listen, serving->health_.get());
  if (!health_port.ok()) {
    return WithExitCode(health_port.status(), kExitUnavailable);
  }
  serving->health_port_ = *std::move(health_port);
  serving->health_->SetServingStatus(kLivenessService, true);
  return serving;
}

Serving::~Serving() {
  if (!shut_down_) Shutdown(absl::Now());
}

std::string Serving::health_address() const {
  return health_port_ ? health_port_->address() : std::string();
}

void Serving::Shutdown(absl::Time deadline) {
  if (shut_down_) return;
  shut_down_ = true;
  if (server_) server_->Shutdown(absl::ToChronoTime(deadline));
  health_port_.reset();
}

std::string ListeningAddress(const std::string& listen,
                             const std::string& bound) {
  const size_t listen_colon = listen.rfind(':');
  const size_t bound_colon = bound.rfind(':');
  if (bound.empty() || listen_colon == std::string::npos || listen_colon == 0 ||
      bound_colon == std::string::npos) {
    return bound;
  }
  return listen.substr(0, listen_colon) + bound.substr(bound_colon);
}

void PrintServingLines(std::ostream& out, const std::string& program,
                       const std::string& address,
                       const std::string& health_address,
                       const std::string& metrics_address) {
  out << program << " listening on " << address << std::endl;
  if (!health_address.empty()) {
    out << program << " health on " << health_address << std::endl;
  }
  if (!metrics_address.empty()) {
    out << program << " metrics on " << metrics_address << std::endl;
  }
}

}  // namespace shardmap
