#include "ops/server_ops.h"

#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>

#include "ops/signals.h"

namespace shardmap {

void AddServerOpsFlags(CLI::App& app, ServerOpsFlags& f) {
  app.add_option("--log-level", f.log_level, "trace, debug, info, warn, error")
      ->capture_default_str();
  app.add_option("--log-format", f.log_format,
                 "text, or json: one JSON object a line on stderr (ts, "
                 "level, component, rank, job_id, trace_id, span_id, msg)")
      ->capture_default_str();
  app.add_option("--grace", f.grace_seconds,
                 "on SIGTERM: seconds the jobs in flight may take to finish "
                 "before they are cancelled (new jobs get UNAVAILABLE)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--metrics", f.metrics,
                 "serve Prometheus metrics at http://HOST:PORT/metrics "
                 "(port 0 = any free port; off by default)");
  app.add_option("--health-listen", f.health_listen,
                 "also serve grpc.health.v1, and nothing else, without TLS "
                 "or token on HOST:PORT, for Kubernetes' grpc probes: \"\" "
                 "is readiness, \"liveness\" is SERVING while the process "
                 "runs (off by default)");
}

void DrainAfterSignal(int sig, DrainGate& gate, double grace_seconds) {
  const absl::Duration grace = absl::Seconds(grace_seconds);
  ExitIfShutdownHangs(grace + absl::Seconds(15));
  spdlog::info("signal {}: draining {} jobs in flight (--grace {}s)", sig,
               gate.in_flight(), grace_seconds);
  if (const int64_t cut = gate.Drain(grace); cut > 0) {
    spdlog::warn("grace period over: cancelled {} jobs", cut);
  }
}

}  // namespace shardmap
