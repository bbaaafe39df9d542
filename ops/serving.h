// What the coordinator and the worker share to start serving: the main
// gRPC server, the health service behind it (and --health-listen's port),
// the --metrics endpoint, the lines they print once listening, and the
// exit code of each way start-up can fail.
//
// Start, Shutdown and the destructor from one thread; the accessors and
// the health service from any.
#ifndef SHARDMAP_OPS_SERVING_H_
#define SHARDMAP_OPS_SERVING_H_

#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>
#include <ostream>
#include <string>

#include "absl/status/statusor.h"
#include "core/exit_codes.h"
#include "ops/metrics_endpoint.h"
#include "rpc/health_port.h"

namespace prometheus {
class Collectable;
}

namespace shardmap {

// `status` carrying the exit code a binary should stop with.
absl::Status WithExitCode(absl::Status status, int code);
// The exit code `status` carries; kExitSoftware if none.
int ExitCodeOf(const absl::Status& status);
// Prints "error: <CODE>: <message>" on stderr; returns ExitCodeOf(status).
int ReportStartupError(const absl::Status& status);

// The --metrics endpoint on `address` serving `registry`, or null for an
// empty address. Errors (with their exit code): FAILED_PRECONDITION
// (kExitConfig) for an address off loopback without --insecure;
// UNAVAILABLE (kExitUnavailable) when it cannot listen.
absl::StatusOr<std::unique_ptr<MetricsEndpoint>> StartMetricsIfAsked(
    const std::string& address,
    std::shared_ptr<prometheus::Collectable> registry, bool insecure);

class Serving {
 public:
  struct Options {
    std::string listen = "127.0.0.1:0";  // HOST:PORT; port 0 = any free
    // Null: plaintext.
    std::shared_ptr<grpc::ServerCredentials> credentials;
    std::string health_listen;  // --health-listen; empty: no health port
    // Registers the process's services (not owned; they must outlive the
    // server, i.e. this object or its Shutdown).
    std::function<void(grpc::ServerBuilder&)> register_services;
  };
  // Binds and starts the server, then the health port; "liveness" is
  // SERVING at once. Errors (kExitUnavailable): UNAVAILABLE "cannot listen
  // on ..." or the health port's.
  static absl::StatusOr<std::unique_ptr<Serving>> Start(const Options& options);
  // Shuts down as Shutdown(absl::Now()) unless Shutdown ran.
  ~Serving();

  // `listen` with the bound port.
  const std::string& address() const { return address_; }
  // The health port's address, or "".
  std::string health_address() const;
  // Statuses set here reach the server's health service and the port's.
  HealthFanout* health() { return health_.get(); }

  // Stops the server (calls still running at `deadline` are cancelled) and
  // the health port; later calls do nothing.
  void Shutdown(absl::Time deadline);

 private:
  Serving() = default;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<HealthFanout> health_;
  std::unique_ptr<HealthPort> health_port_;
  std::string address_;
  bool shut_down_ = false;
};

// What a server reports it listens on: the host of `listen` as given
// (0.0.0.0 stays 0.0.0.0) with the port of `bound`, the dialable address
// the server got (port 0 resolved). Empty when `bound` is.
std::string ListeningAddress(const std::string& listen,
                             const std::string& bound);

// Prints "<program> listening on <address>", then "<program> health on
// <...>" and "<program> metrics on <...>" for those that are not empty:
// the lines scripts and tests wait for. Give the ListeningAddress forms
// (readers dial them through DialableAddress, rpc/channel.h).
void PrintServingLines(std::ostream& out, const std::string& program,
                       const std::string& address,
                       const std::string& health_address,
                       const std::string& metrics_address);

}  // namespace shardmap

#endif  // SHARDMAP_OPS_SERVING_H_
