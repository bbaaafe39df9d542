#include "worker/routed_peer_transport.h"

#include "worker/metrics/worker_metrics.h"

namespace shardmap {
namespace {

ShmPeerTransport::Options ShmOptions(const GrpcPeerTransport::Options& o) {
  ShmPeerTransport::Options s;
  s.job_id = o.job_id;
  s.device = o.device;
  s.num_devices = static_cast<int64_t>(o.addresses.size());
  s.deadline = o.deadline;
  s.collective_timeout = o.collective_timeout;
  s.aborted = o.aborted;
  // Channels are looked up per message by RoutedPeerTransport.
  s.sender = [](int64_t) { return nullptr; };
  s.receiver = [](int64_t) { return nullptr; };
  return s;
}

bool IsNotThere(const absl::Status& s) {
  return s.code() == absl::StatusCode::kDeadlineExceeded ||
         s.code() == absl::StatusCode::kUnavailable;
}

}  // namespace

RoutedPeerTransport::RoutedPeerTransport(PeerNetwork* network, ShmNetwork* shm,
                                         GrpcPeerTransport::Options options)
    : network_(network),
      shm_(shm),
      options_(options),
      grpc_(network, std::move(options)),
      shm_transport_(ShmOptions(options_)) {}

RoutedPeerTransport::~RoutedPeerTransport() {
  if (shm_ != nullptr) shm_->ForgetJob(options_.job_id);
}

bool RoutedPeerTransport::MayShare(int64_t peer,
                                   const PeerMessage& message) const {
  return shm_ != nullptr && peer != options_.device && peer >= 0 &&
         peer < num_devices() && message.fingerprint != nullptr &&
         options_.addresses[peer] != network_->my_address();
}

absl::Status RoutedPeerTransport::Send(int64_t to, const PeerMessage& message,
                                       absl::Span<const uint8_t> data) {
  return Post(to, message, data, Mode::kSend);
}

absl::Status RoutedPeerTransport::Lend(int64_t to, const PeerMessage& message,
                                       absl::Span<const uint8_t> data) {
  return Post(to, message, data, Mode::kLend);
}

absl::Status RoutedPeerTransport::LendUntilTaken(
    int64_t to, const PeerMessage& message, absl::Span<const uint8_t> data) {
  return Post(to, message, data, Mode::kLendUntilTaken);
}

absl::Status RoutedPeerTransport::Settle(bool abandon) {
  // Both, even when the first fails: each must take its buffers back.
  absl::Status shm = shm_transport_.Settle(abandon);
  absl::Status grpc = grpc_.Settle(abandon);
  return shm.ok() ? grpc : shm;
}

absl::Status RoutedPeerTransport::Post(int64_t to, const PeerMessage& message,
                                       absl::Span<const uint8_t> data,
                                       Mode mode) {
  if (MayShare(to, message)) {
    std::shared_ptr<ShmSender> sender = shm_->SenderTo(
        options_.addresses[to], options_.deadline, grpc_.incarnation(to));
    if (sender != nullptr) {
      absl::Status s = mode == Mode::kLend
                           ? shm_transport_.LendVia(sender, to, message, data)
                           : shm_transport_.SendVia(*sender, to, message, data);
      if (s.ok()) {
        worker_metrics::PeerBytesSent(options_.addresses[to], data.size());
      }
      return s;
    }
  }
  return mode == Mode::kSend ? grpc_.Send(to, message, data)
                             : grpc_.Lend(to, message, data);
}

absl::Status RoutedPeerTransport::RecvChunks(int64_t from,
                                             const PeerMessage& message,
                                             size_t size,
                                             const ChunkConsumer& consume) {
  if (!MayReceiveShared(from, message)) {
    return grpc_.RecvChunks(from, message, size, consume);
  }
  return PeerTransport::RecvChunks(from, message, size, consume);
}

absl::Status RoutedPeerTransport::Recv(int64_t from, const PeerMessage& message,
                                       absl::Span<uint8_t> out) {
  if (!MayReceiveShared(from, message)) {
    return grpc_.Recv(from, message, out);
  }
  const std::string& address = options_.addresses[from];
  const uint64_t incarnation = grpc_.incarnation(from);
  PeerInbox::Want want;
  want.job_id = options_.job_id;
  want.from_device = from;
  want.from_address = address;
  want.from_incarnation = incarnation;
  want.seq = message.seq;
  want.step = message.step;
  want.fingerprint = message.fingerprint;
  const auto never = [] { return absl::OkStatus(); };
  for (;;) {
    std::shared_ptr<ShmReceiver> receiver =
        shm_->ReceiverFrom(address, incarnation);
    if (receiver != nullptr) {
      bool found = false;
      auto look_in_inbox = [&]() -> absl::Status {
        absl::Status s = network_->inbox()->Take(want, out, absl::Now(), never);
        if (s.ok()) {
          found = true;
          return absl::CancelledError("came over gRPC");
        }
        return IsNotThere(s) ? absl::OkStatus() : s;
      };
      absl::Status s =
          shm_transport_.TakeVia(*receiver, from, message, out, look_in_inbox);
      if (found) return absl::OkStatus();  // counted by the Peer service
      if (s.ok()) worker_metrics::PeerBytesReceived(address, out.size());
      return s;
    }
    // Over gRPC, unless a channel from the peer appears meanwhile.
    bool switched = false;
    auto aborted = [&]() -> absl::Status {
      if (absl::Status s = options_.aborted(); !s.ok()) return s;
      if (shm_->ReceiverFrom(address, incarnation) != nullptr) {
        switched = true;
        return absl::CancelledError("moved to shared memory");
      }
      return absl::OkStatus();
    };
    const absl::Time deadline =
        std::min(options_.deadline, absl::Now() + options_.collective_timeout);
    absl::Status s = network_->inbox()->Take(want, out, deadline, aborted);
    if (!switched) return s;
  }
}

}  // namespace shardmap
