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
    threads.swap(finished_);
    for (auto& [address, lane] : lanes_) {
      lane.pending.clear();
      if (lane.thread.joinable()) threads.push_back(std::move(lane.thread));
    }
  }
  for (std::thread& t : threads) t.join();
}

void TicketSkipper::Skip(const std::string& address,
                         const std::string& worker_id, uint64_t ticket) {
  std::vector<std::thread> finished;  // senders that ended, joined unlocked
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    finished.swap(finished_);
    auto [it, added] = lanes_.try_emplace(address);
    it->second.pending[worker_id].push_back(ticket);
    // A new lane's sender starts only once the lane is in place (it takes
    // mu_ first).
    if (added)
      it->second.thread = std::thread([this, address] { Drain(address); });
  }
  for (std::thread& t : finished) t.join();
}

void TicketSkipper::Drain(const std::string& address) {
  while (true) {
    std::map<std::string, std::vector<uint64_t>> batch;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;  // the destructor joins this thread
      auto it = lanes_.find(address);
      Lane& lane = it->second;
      if (lane.pending.empty()) {
        finished_.push_back(std::move(lane.thread));
        lanes_.erase(it);
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
  auto idle = [this]()
                  ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return lanes_.empty(); };
  return mu_.AwaitWithTimeout(absl::Condition(&idle), timeout);
}

size_t TicketSkipper::lanes() const {
  absl::MutexLock lock(&mu_);
  return lanes_.size();
}

}  // namespace shardmap
