// The coordinator's Prometheus metrics (served with --metrics):
//   shardmap_jobs_total{function,code}   jobs finished, by gRPC status;
//                                        function is "unknown" for a name
//                                        no worker registered, so that
//                                        clients cannot add label values
//   shardmap_job_duration_seconds        histogram of job wall time, from
//                                        the call's arrival (a wait for a
//                                        turn included)
//   shardmap_workers_up                  live workers in the pool
//   shardmap_jobs_running                jobs running now
//   shardmap_jobs_waiting                jobs waiting for a turn
//
// Thread-safe.
#ifndef SHARDMAP_SERVER_COORDINATOR_METRICS_H_
#define SHARDMAP_SERVER_COORDINATOR_METRICS_H_

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace shardmap {

class CoordinatorMetrics {
 public:
  // `is_registered` says whether a function name may become a label
  // value; it is called on JobDone's thread.
  explicit CoordinatorMetrics(
      std::function<bool(const std::string&)> is_registered);

  // One job ended with `code` after `elapsed`. `function` is empty for a
  // stream that never named one; it is counted as "unknown" unless
  // `is_registered` accepts it.
  void JobDone(const std::string& function, absl::StatusCode code,
               absl::Duration elapsed);
  void SetWorkersUp(int64_t live);
  void SetJobs(int running, int waiting);

  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

 private:
  const std::function<bool(const std::string&)> is_registered_;
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>& jobs_;
  prometheus::Histogram& duration_;
  prometheus::Gauge& workers_up_;
  prometheus::Gauge& jobs_running_;
  prometheus::Gauge& jobs_waiting_;
};

}  // namespace shardmap

#endif  // SHARDMAP_SERVER_COORDINATOR_METRICS_H_
