#include "server/ticket_skipper.h"

#include <spdlog/spdlog.h>

namespace shardmap {

TicketSkipper::TicketSkipper(WorkerConnector* connector, Options options)
    : connector_(connector), options_(options) {}

TicketSkipper::~TicketSkipper() {
  std::vector<std::thread> threads;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    for (auto& [address, lane] : lanes_) {
      lane.pending.clear();
      if (lane.thread.joinable()) threads.push_back(std::move(lane.thread));
    }
  }
  for (std::thread& t : threads) t.join();
}

void TicketSkipper::Skip(const std::string& address,
                         const std::string& worker_id, uint64_t ticket) {
  std::thread finished;  // a sender that ended, joined outside the lock
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    Lane& lane = lanes_[address];
    lane.pending[worker_id].push_back(ticket);
    if (lane.busy) return;
    lane.busy = true;
    finished = std::move(lane.thread);
    lane.thread = std::thread([this, address] { Drain(address); });
  }
  if (finished.joinable()) finished.join();
}

void TicketSkipper::Drain(const std::string& address) {
  while (true) {
    std::map<std::string, std::vector<uint64_t>> batch;
    {
      absl::MutexLock lock(&mu_);
      Lane& lane = lanes_[address];
      if (lane.pending.empty() || stopping_) {
        lane.busy = false;
        return;
      }
      batch.swap(lane.pending);
    }
    for (auto& [worker_id, tickets] : batch) {
      v1::SkipTicketsRequest request;
      request.set_worker_id(worker_id);
      for (uint64_t t : tickets) request.add_tickets(t);
      Send(address, request);
    }
  }
}

void TicketSkipper::Send(const std::string& address,
                         const v1::SkipTicketsRequest& request) {
  absl::Status s;
  for (int attempt = 1; attempt <= options_.attempts; ++attempt) {
    s = connector_->SkipTickets(address, request,
                                absl::Now() + options_.attempt_timeout);
    if (s.ok()) return;
    absl::MutexLock lock(&mu_);
    if (stopping_ || attempt == options_.attempts) break;
    // Woken early only by the skipper stopping.
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), options_.retry_pause);
  }
  spdlog::info(
      "could not tell worker {} (id {}) to skip {} job ticket(s); it is "
      "probably gone: {}",
      address, request.worker_id(), request.tickets_size(), s.ToString());
}

bool TicketSkipper::WaitIdle(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (const auto& [address, lane] : lanes_) {
      if (lane.busy || !lane.pending.empty()) return false;
    }
    return true;
  };
  return mu_.AwaitWithTimeout(absl::Condition(&idle), timeout);
}

}  // namespace shardmap
