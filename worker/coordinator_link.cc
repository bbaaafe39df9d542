#include "worker/coordinator_link.h"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <random>

#include "core/status_util.h"
#include "rpc/channel.h"
#include "rpc/grpc_status.h"

namespace shardmap {
namespace {

uint64_t RandomIncarnation() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

}  // namespace

CoordinatorLink::CoordinatorLink(const Options& options)
    : options_(options),
      incarnation_(options.incarnation != 0 ? options.incarnation
                                            : RandomIncarnation()) {
  stub_ = v1::WorkerRegistry::NewStub(MakeChannel(options_.coordinator));
}

absl::StatusOr<std::unique_ptr<CoordinatorLink>> CoordinatorLink::Create(
    const Options& options) {
  if (options.coordinator.empty()) {
    return absl::InvalidArgumentError("--coordinator is required");
  }
  std::unique_ptr<CoordinatorLink> link(new CoordinatorLink(options));
  link->thread_ = std::thread([l = link.get()] { l->Loop(); });
  return link;
}

CoordinatorLink::~CoordinatorLink() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

std::string CoordinatorLink::worker_id() const {
  absl::MutexLock lock(&mu_);
  return worker_id_;
}

bool CoordinatorLink::WaitForStop(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stop_ || kick_;
  };
  mu_.AwaitWithTimeout(absl::Condition(&woken), d);
  kick_ = false;
  return stop_;
}

void CoordinatorLink::SetDraining() {
  absl::MutexLock lock(&mu_);
  draining_ = true;
  kick_ = true;
}

void CoordinatorLink::Loop() {
  std::string id;
  absl::Duration interval = absl::Seconds(1);
  bool warned = false;
  while (true) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + options_.rpc_timeout));
    if (id.empty()) {
      v1::RegisterRequest req;
      req.set_address(options_.advertise);
      req.set_incarnation(incarnation_);
      for (const auto& f : options_.functions) *req.add_functions() = f;
      if (options_.held_blocks) {
        for (auto& b : options_.held_blocks()) *req.add_held() = std::move(b);
      }
      if (options_.rank.has_value()) req.set_rank(*options_.rank);
      req.set_inline_chunks(true);
      v1::RegisterResponse resp;
      grpc::Status s = stub_->Register(&ctx, req, &resp);
      if (s.ok()) {
        id = resp.worker_id();
        interval = absl::Milliseconds(
            std::max<int64_t>(10, resp.heartbeat_interval_ms()));
        warned = false;
        {
          absl::MutexLock lock(&mu_);
          worker_id_ = id;
        }
        spdlog::info("registered with coordinator {} as {}",
                     options_.coordinator, id);
        if (options_.drop_blocks && resp.drop_size() > 0) {
          options_.drop_blocks(std::vector<v1::HeldBlock>(resp.drop().begin(),
                                                          resp.drop().end()));
        }
        if (options_.on_registered) options_.on_registered(true);
        if (WaitForStop(interval)) return;
        continue;
      }
      if (!warned) {
        // ALREADY_EXISTS: another live worker holds our rank; it may be
        // our own predecessor, not yet expired, so keep trying.
        spdlog::log(s.error_code() == grpc::StatusCode::ALREADY_EXISTS
                        ? spdlog::level::err
                        : spdlog::level::warn,
                    "cannot register with coordinator {}: {}: {}; retrying",
                    options_.coordinator,
                    StatusCodeName(FromGrpcStatus(s).code()),
                    s.error_message());
        warned = true;
      }
      if (WaitForStop(options_.retry_interval)) return;
      continue;
    }
    v1::HeartbeatRequest req;
    req.set_worker_id(id);
    req.set_incarnation(incarnation_);
    {
      absl::MutexLock lock(&mu_);
      req.set_draining(draining_);
    }
    v1::HeartbeatResponse resp;
    grpc::Status s = stub_->Heartbeat(&ctx, req, &resp);
    if (s.error_code() == grpc::StatusCode::NOT_FOUND) {
      spdlog::info("coordinator no longer knows {}; registering again", id);
      id.clear();
      if (options_.on_registered) options_.on_registered(false);
      continue;
    }
    if (!s.ok() && !warned) {
      spdlog::warn("heartbeat to {} failed: {}", options_.coordinator,
                   s.error_message());
      warned = true;
    } else if (s.ok()) {
      warned = false;
    }
    if (WaitForStop(interval)) return;
  }
}

}  // namespace shardmap
