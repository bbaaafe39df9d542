// Health checks for Kubernetes' native gRPC probes.
//
// The kubelet's `grpc:` probe speaks plaintext and sends no token, so it
// cannot reach a server that requires mutual TLS. --health-listen starts a
// second gRPC server that serves grpc.health.v1 and nothing else, without
// TLS or token: it tells only whether the process is ready. It answers
// what the main server's health service says, plus the service
// "liveness", SERVING for as long as the process runs (a coordinator
// waiting for its workers is not ready, but restarting it would not help).
//
// HealthFanout is the health service the process sets statuses on; it
// passes each to the main server's service and to the health port's.
#ifndef SHARDMAP_CORE_HEALTH_PORT_H_
#define SHARDMAP_CORE_HEALTH_PORT_H_

#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/server.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace shardmap {

inline constexpr char kLivenessService[] = "liveness";

class HealthFanout : public grpc::HealthCheckServiceInterface {
 public:
  // `primary` is the main server's service; Shutdown shuts it down (every
  // status NOT_SERVING, later updates ignored). Not owned.
  explicit HealthFanout(grpc::HealthCheckServiceInterface* primary);
  // A health port's service: gets every status; on Shutdown every one but
  // "liveness" turns NOT_SERVING. Not owned.
  void AddHealthPort(grpc::HealthCheckServiceInterface* port);

  void SetServingStatus(const std::string& service_name, bool serving) override;
  void SetServingStatus(bool serving) override;
  void Shutdown() override;

 private:
  absl::Mutex mu_;
  grpc::HealthCheckServiceInterface* const primary_;
  std::vector<grpc::HealthCheckServiceInterface*> ports_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> names_ ABSL_GUARDED_BY(mu_);  // every one set
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

// The health-only server.
class HealthPort {
 public:
  // Listens on `listen` (HOST:PORT, port 0 = any). UNAVAILABLE if it
  // cannot. Its "liveness" is SERVING at once, "" NOT_SERVING; any other
  // method is UNIMPLEMENTED.
  static absl::StatusOr<std::unique_ptr<HealthPort>> Start(
      const std::string& listen);
  // Start, for a non-empty `listen` (--health-listen), with the port added
  // to `fanout`; null for an empty one.
  static absl::StatusOr<std::unique_ptr<HealthPort>> StartIfAsked(
      const std::string& listen, HealthFanout* fanout);
  ~HealthPort();

  const std::string& address() const { return address_; }
  grpc::HealthCheckServiceInterface* service() {
    return server_->GetHealthCheckService();
  }

 private:
  class Unimplemented;
  HealthPort();
  std::unique_ptr<Unimplemented> unimplemented_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

}  // namespace shardmap

#endif  // SHARDMAP_CORE_HEALTH_PORT_H_
