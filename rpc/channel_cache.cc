#include "rpc/channel_cache.h"

#include <spdlog/spdlog.h>

#include <utility>

#include "rpc/channel.h"

namespace shardmap {

ChannelCache::ChannelCache(Dial dial)
    : dial_(dial ? std::move(dial) : [](const std::string& address) {
        return MakeChannel(address);
      }) {}

ChannelCache::Entry& ChannelCache::EntryLocked(const std::string& address) {
  Entry& entry = entries_[address];
  if (!entry.channel) entry.channel = dial_(address);
  return entry;
}

std::shared_ptr<grpc::Channel> ChannelCache::Get(const std::string& address) {
  absl::MutexLock lock(&mu_);
  return EntryLocked(address).channel;
}

std::shared_ptr<void> ChannelCache::StubOf(
    const std::string& address, std::type_index service, const MakeStub& make,
    std::shared_ptr<grpc::Channel>* channel) {
  absl::MutexLock lock(&mu_);
  Entry& entry = EntryLocked(address);
  std::shared_ptr<void>& stub = entry.stubs[service];
  if (!stub) stub = make(entry.channel);
  if (channel != nullptr) *channel = entry.channel;
  return stub;
}

void ChannelCache::Evict(const std::string& address) {
  Entry gone;  // released outside the lock
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(address);
  if (it == entries_.end()) return;
  gone = std::move(it->second);
  entries_.erase(it);
}

bool ChannelCache::OnCallEnded(const std::string& address,
                               const std::shared_ptr<grpc::Channel>& channel,
                               const absl::Status& status) {
  if (status.code() != absl::StatusCode::kUnavailable || channel == nullptr) {
    return false;
  }
  if (channel->GetState(/*try_to_connect=*/false) == GRPC_CHANNEL_READY) {
    return false;  // the peer answered UNAVAILABLE over a live connection
  }
  Entry gone;
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(address);
  if (it == entries_.end() || it->second.channel != channel) return false;
  spdlog::debug("{} is unreachable ({}); its channel is dialled afresh",
                address, std::string(status.message()));
  gone = std::move(it->second);
  entries_.erase(it);
  return true;
}

size_t ChannelCache::size() const {
  absl::MutexLock lock(&mu_);
  return entries_.size();
}

}  // namespace shardmap
