#include "server/coordinator_health.h"

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"

namespace shardmap {

CoordinatorHealth::CoordinatorHealth(const Options& options,
                                     const WorkerPool* pool)
    : options_(options),
      pool_(pool),
      init_deadline_(absl::Now() + options.init_timeout) {
  {
    absl::MutexLock lock(&mu_);
    last_ = pool_->CheckComplete(options_.expected_workers);
    ever_complete_ = last_.ok();
    Publish(last_.ok());
  }
  thread_ = std::thread([this] { Loop(); });
}

CoordinatorHealth::~CoordinatorHealth() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void CoordinatorHealth::Publish(bool serving) {
  serving_ = serving;
  if (health_ == nullptr) return;
  health_->SetServingStatus("", serving);
  health_->SetServingStatus(kServiceName, serving);
}

void CoordinatorHealth::Loop() {
  absl::MutexLock lock(&mu_);
  while (!mu_.AwaitWithTimeout(absl::Condition(&stop_), options_.poll)) {
    mu_.Unlock();
    // The pool takes its own lock; never call it under ours.
    absl::Status complete = pool_->CheckComplete(options_.expected_workers);
    const int64_t live = static_cast<int64_t>(pool_->LiveWorkers().size());
    mu_.Lock();
    if (options_.on_poll) options_.on_poll(live);
    if (shut_down_) continue;
    if (complete.ok() != serving_) {
      if (complete.ok()) {
        spdlog::info("all {} expected workers are live: SERVING",
                     options_.expected_workers);
      } else {
        spdlog::warn("health NOT_SERVING: {}", std::string(complete.message()));
      }
      Publish(complete.ok());
    }
    ever_complete_ = ever_complete_ || complete.ok();
    last_ = std::move(complete);
  }
}

absl::Status CoordinatorHealth::AwaitBringUp(absl::Time deadline) const {
  const absl::Time until = std::min(deadline, init_deadline_);
  absl::MutexLock lock(&mu_);
  if (mu_.AwaitWithDeadline(absl::Condition(&ever_complete_), until)) {
    return absl::OkStatus();
  }
  // Say which limit ended the wait: the bring-up's, or the job's own.
  return absl::UnavailableError(absl::StrCat(
      "the cluster did not come up (--expect-workers ",
      options_.expected_workers, ") ",
      until == init_deadline_
          ? absl::StrCat("within --init-timeout ",
                         absl::FormatDuration(options_.init_timeout))
          : "before the job's deadline",
      ": ", last_.message()));
}

void CoordinatorHealth::Attach(grpc::HealthCheckServiceInterface* health) {
  absl::MutexLock lock(&mu_);
  health_ = health;
  Publish(shut_down_ ? false : serving_);
}

void CoordinatorHealth::Shutdown() {
  absl::MutexLock lock(&mu_);
  shut_down_ = true;
  Publish(false);
  // Ignore later updates, including the default service's.
  if (health_ != nullptr) health_->Shutdown();
}

}  // namespace shardmap
