// What the coordinator and the worker share for operations: the flags
// --log-level, --log-format, --grace and --metrics, and the drain after
// SIGTERM.
#ifndef SHARDMAP_CORE_SERVER_OPS_H_
#define SHARDMAP_CORE_SERVER_OPS_H_

#include <string>

#include "rpc/drain_gate.h"

namespace CLI {
class App;
}

namespace shardmap {

struct ServerOpsFlags {
  std::string log_level = "info";
  std::string log_format = "text";
  double grace_seconds = 30;
  std::string metrics;  // HOST:PORT; empty = no metrics
  // HOST:PORT of a plaintext health-only server (rpc/health_port.h);
  // empty = none.
  std::string health_listen;
};
void AddServerOpsFlags(CLI::App& app, ServerOpsFlags& flags);

// After termination signal `sig`: bounds the rest of the shutdown
// (ExitIfShutdownHangs), then drains `gate` for the grace period, logging
// what happened.
void DrainAfterSignal(int sig, DrainGate& gate, double grace_seconds);

}  // namespace shardmap

#endif  // SHARDMAP_CORE_SERVER_OPS_H_
