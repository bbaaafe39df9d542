// Test helpers for the shared-memory channel tests: both ends of one
// channel in this process, and two ShmNetworks on 127.0.0.1.
#ifndef SHARDMAP_TESTS_UNIT_SHM_PAIR_H_
#define SHARDMAP_TESTS_UNIT_SHM_PAIR_H_

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "rpc/channel_cache.h"
#include "tests/unit/local_server.h"
#include "worker/shm_network.h"
#include "worker/transport/shm/cross_memory.h"
#include "worker/transport/shm/shm_receiver.h"
#include "worker/transport/shm/shm_ring.h"
#include "worker/transport/shm/shm_sender.h"

namespace shardmap {

// What the lent-buffer tests share (a namespace of its own: shm_test.cc
// has its own helpers of these names).
namespace shm_lent_testing {

using Bytes = std::vector<uint8_t>;

inline const auto kNever = [] { return absl::OkStatus(); };

inline absl::Time In(absl::Duration d) { return absl::Now() + d; }

// A pattern no two messages of a test share.
inline Bytes Pattern(size_t n, uint8_t salt) {
  Bytes b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(i * 13 + salt);
  return b;
}

// Message `step` of collective 7 of `job`, from device 0 to device 1.
inline ShmMessageKey Key(uint32_t step, const std::string& job = "j") {
  return ShmMessageKey{job, 0, 1, 7, step};
}

}  // namespace shm_lent_testing

// Both ends of one channel in this process.
struct Channel {
  explicit Channel(size_t ring_bytes = 64 << 10, bool lend = false) {
    auto writer = ShmRing::Create(ring_bytes);
    EXPECT_TRUE(writer.ok()) << writer.status();
    auto reader =
        ShmRing::Attach((*writer)->name(), (*writer)->nonce(), ring_bytes);
    EXPECT_TRUE(reader.ok()) << reader.status();
    (*writer)->Unlink();
    ShmSender::Options options{"the receiver"};
    options.lend = lend;
    sender = std::make_unique<ShmSender>(*std::move(writer), options);
    receiver = std::make_unique<ShmReceiver>(
        *std::move(reader), "the sender",
        lend ? ProcessVmReader::Get() : nullptr, lend ? getpid() : 0);
  }
  std::unique_ptr<ShmSender> sender;
  std::unique_ptr<ShmReceiver> receiver;
};

// Two networks, the receiving one serving ShmPeer on 127.0.0.1.
struct Pair {
  // `single_copy`: the sender offers single-copy transfers.
  explicit Pair(ShmNetwork::Options receiver_options,
                bool single_copy = false) {
    receiver_options.ring_bytes = 64 << 10;
    b = std::make_unique<ShmNetwork>(receiver_options, &channels);
    service = std::make_unique<ShmPeerService>(b.get());
    server = StartLocalServer(service.get(), &b_address);
    ShmNetwork::Options a_options;
    a_options.my_address = "a:1";
    a_options.ring_bytes = 64 << 10;
    a_options.single_copy = single_copy;
    a = std::make_unique<ShmNetwork>(a_options, &channels);
  }
  ~Pair() { server->Shutdown(); }
  ChannelCache channels;
  std::unique_ptr<ShmNetwork> a, b;
  std::unique_ptr<ShmPeerService> service;
  std::unique_ptr<grpc::Server> server;
  std::string b_address;
};

}  // namespace shardmap

#endif  // SHARDMAP_TESTS_UNIT_SHM_PAIR_H_
