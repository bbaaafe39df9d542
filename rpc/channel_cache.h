// One gRPC channel per peer address, shared by every stub a process makes
// to that address (the coordinator's job calls and block calls to a worker;
// a worker's peer links, shared-memory handshakes and block reads).
//
// A channel is dialled on the first Get of its address and kept until it
// is evicted:
//  - Evict: the peer left (its heartbeats stopped) or another process now
//    answers at the address (it restarted with a new incarnation);
//  - OnCallEnded: a call failed with UNAVAILABLE while the channel is not
//    connected, i.e. the transport failed (the peer is unreachable). The
//    next Get dials afresh instead of waiting out the old channel's
//    reconnect backoff, so a peer restarted at the same address is
//    reachable at once. An UNAVAILABLE the peer itself answered (its
//    connection is up) keeps the channel.
// Calls under way on an evicted channel go on; the channel closes when its
// last stub is released.
//
// Thread-safe.
#ifndef SHARDMAP_RPC_CHANNEL_CACHE_H_
#define SHARDMAP_RPC_CHANNEL_CACHE_H_

#include <grpcpp/channel.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <typeindex>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace shardmap {

class ChannelCache {
 public:
  // Makes a new channel to an address; MakeChannel (rpc/channel.h) when
  // none is given.
  using Dial =
      std::function<std::shared_ptr<grpc::Channel>(const std::string& address)>;
  explicit ChannelCache(Dial dial = nullptr);
  ChannelCache(const ChannelCache&) = delete;
  ChannelCache& operator=(const ChannelCache&) = delete;

  // The channel to `address`, dialled now if none is cached.
  std::shared_ptr<grpc::Channel> Get(const std::string& address);

  // A stub of gRPC service `Service` (e.g. v1::Worker) on the channel to
  // `address`, made once per channel. `*channel`, if given, is set to that
  // channel (for OnCallEnded).
  template <typename Service>
  std::shared_ptr<typename Service::Stub> Stub(
      const std::string& address,
      std::shared_ptr<grpc::Channel>* channel = nullptr) {
    std::shared_ptr<void> stub = StubOf(
        address, typeid(Service),
        [](const std::shared_ptr<grpc::Channel>& c) -> std::shared_ptr<void> {
          return std::shared_ptr<typename Service::Stub>(Service::NewStub(c));
        },
        channel);
    return std::static_pointer_cast<typename Service::Stub>(stub);
  }

  // Drops the channel of `address` (and its stubs), if any.
  void Evict(const std::string& address);

  // Reports how a call on `channel` (from Get or Stub of `address`)
  // ended. Evicts `channel` if it is still the one cached for `address`,
  // `status` is UNAVAILABLE and the channel is not connected (the
  // transport failed, not the peer). Returns whether it evicted.
  bool OnCallEnded(const std::string& address,
                   const std::shared_ptr<grpc::Channel>& channel,
                   const absl::Status& status);

  // Addresses with a cached channel.
  size_t size() const;

 private:
  struct Entry {
    std::shared_ptr<grpc::Channel> channel;
    std::map<std::type_index, std::shared_ptr<void>> stubs;
  };
  using MakeStub = std::function<std::shared_ptr<void>(
      const std::shared_ptr<grpc::Channel>&)>;
  std::shared_ptr<void> StubOf(const std::string& address,
                               std::type_index service, const MakeStub& make,
                               std::shared_ptr<grpc::Channel>* channel);
  Entry& EntryLocked(const std::string& address)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Dial dial_;
  mutable absl::Mutex mu_;
  std::map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace shardmap

#endif  // SHARDMAP_RPC_CHANNEL_CACHE_H_
