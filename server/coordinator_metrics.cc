#include "server/coordinator_metrics.h"

#include "core/status_util.h"

namespace shardmap {
namespace {

// 1 ms to ~10 min, about three buckets a decade.
prometheus::Histogram::BucketBoundaries JobBuckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
          1,     2.5,    5,     10,   25,    50,   100, 250,  600};
}

}  // namespace

CoordinatorMetrics::CoordinatorMetrics(
    std::function<bool(const std::string&)> is_registered)
    : is_registered_(std::move(is_registered)),
      registry_(std::make_shared<prometheus::Registry>()),
      jobs_(prometheus::BuildCounter()
                .Name("shardmap_jobs_total")
                .Help("Jobs finished, by function and gRPC status code")
                .Register(*registry_)),
      duration_(prometheus::BuildHistogram()
                    .Name("shardmap_job_duration_seconds")
                    .Help("Wall time of jobs on the coordinator, from the "
                          "call's arrival (a wait for a turn included) to "
                          "its last output chunk")
                    .Register(*registry_)
                    .Add({}, JobBuckets())),
      workers_up_(prometheus::BuildGauge()
                      .Name("shardmap_workers_up")
                      .Help("Workers registered and heartbeating")
                      .Register(*registry_)
                      .Add({})),
      jobs_running_(prometheus::BuildGauge()
                        .Name("shardmap_jobs_running")
                        .Help("Jobs running now")
                        .Register(*registry_)
                        .Add({})),
      jobs_waiting_(prometheus::BuildGauge()
                        .Name("shardmap_jobs_waiting")
                        .Help("Jobs waiting for a turn (beyond "
                              "--max-concurrent-jobs)")
                        .Register(*registry_)
                        .Add({})) {}

void CoordinatorMetrics::JobDone(const std::string& function,
                                 absl::StatusCode code,
                                 absl::Duration elapsed) {
  const bool known = !function.empty() && is_registered_(function);
  jobs_
      .Add({{"function", known ? function : "unknown"},
            {"code", StatusCodeName(code)}})
      .Increment();
  duration_.Observe(absl::ToDoubleSeconds(elapsed));
}

void CoordinatorMetrics::SetWorkersUp(int64_t live) {
  workers_up_.Set(static_cast<double>(live));
}

void CoordinatorMetrics::SetJobs(int running, int waiting) {
  jobs_running_.Set(running);
  jobs_waiting_.Set(waiting);
}

}  // namespace shardmap
