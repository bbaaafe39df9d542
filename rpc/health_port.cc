#include "rpc/health_port.h"

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>

#include "absl/strings/str_cat.h"
#include "rpc/channel.h"

namespace shardmap {

HealthFanout::HealthFanout(grpc::HealthCheckServiceInterface* primary)
    : primary_(primary) {}

void HealthFanout::AddHealthPort(grpc::HealthCheckServiceInterface* port) {
  absl::MutexLock lock(&mu_);
  ports_.push_back(port);
}

void HealthFanout::SetServingStatus(const std::string& service_name,
                                    bool serving) {
  absl::MutexLock lock(&mu_);
  if (shut_down_) return;
  names_.insert(service_name);
  primary_->SetServingStatus(service_name, serving);
  for (auto* port : ports_) port->SetServingStatus(service_name, serving);
}

void HealthFanout::SetServingStatus(bool serving) {
  absl::MutexLock lock(&mu_);
  if (shut_down_) return;
  primary_->SetServingStatus(serving);
  for (auto* port : ports_) {
    for (const std::string& name : names_) {
      if (name != kLivenessService) port->SetServingStatus(name, serving);
    }
    port->SetServingStatus("", serving);
  }
}

void HealthFanout::Shutdown() {
  absl::MutexLock lock(&mu_);
  if (shut_down_) return;
  shut_down_ = true;
  primary_->Shutdown();
  for (auto* port : ports_) {
    port->SetServingStatus("", false);
    for (const std::string& name : names_) {
      if (name != kLivenessService) port->SetServingStatus(name, false);
    }
  }
}

// Answers every method but the health service's: a server needs a
// service of its own besides the default health one to run at all.
class HealthPort::Unimplemented : public grpc::CallbackGenericService {
  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext* context) override {
    class Refusal : public grpc::ServerGenericBidiReactor {
     public:
      Refusal() {
        Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                            "this port serves grpc.health.v1 only"));
      }
      void OnDone() override { delete this; }
    };
    return new Refusal();
  }
};

HealthPort::HealthPort() : unimplemented_(new Unimplemented()) {}

HealthPort::~HealthPort() {
  if (server_ != nullptr) {
    server_->Shutdown(std::chrono::system_clock::now() +
                      std::chrono::seconds(1));
  }
}

absl::StatusOr<std::unique_ptr<HealthPort>> HealthPort::StartIfAsked(
    const std::string& listen, HealthFanout* fanout) {
  if (listen.empty()) return nullptr;
  auto port = Start(listen);
  if (port.ok()) fanout->AddHealthPort((*port)->service());
  return port;
}

absl::StatusOr<std::unique_ptr<HealthPort>> HealthPort::Start(
    const std::string& listen) {
  std::unique_ptr<HealthPort> port(new HealthPort());
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int bound = 0;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &bound);
  builder.RegisterCallbackGenericService(port->unimplemented_.get());
  port->server_ = builder.BuildAndStart();
  if (port->server_ == nullptr || bound == 0) {
    return absl::UnavailableError(
        absl::StrCat("--health-listen: cannot listen on ", listen));
  }
  port->service()->SetServingStatus("", false);
  port->service()->SetServingStatus(kLivenessService, true);
  port->address_ = ReplacePort(listen, bound);
  return port;
}

}  // namespace shardmap
