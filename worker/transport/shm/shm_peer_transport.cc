#include "worker/transport/shm/shm_peer_transport.h"

#include "absl/strings/str_cat.h"
#include "core/status_util.h"

namespace shardmap {

absl::Status ShmPeerTransport::CheckPeer(int64_t peer,
                                         const PeerMessage& message,
                                         const char* verb) const {
  if (peer < 0 || peer >= num_devices()) {
    return absl::InvalidArgumentError(absl::StrCat(
        verb, " device ", peer, " outside the mesh of ", num_devices()));
  }
  if (message.fingerprint == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("PeerMessage.fingerprint is not set (", verb, " device ",
                     peer, ", seq ", message.seq, ")"));
  }
  return absl::OkStatus();
}

absl::Status ShmPeerTransport::Send(int64_t to, const PeerMessage& message,
                                    absl::Span<const uint8_t> data) {
  return Post(to, message, data, /*lend=*/false);
}

absl::Status ShmPeerTransport::Post(int64_t to, const PeerMessage& message,
                                    absl::Span<const uint8_t> data, bool lend) {
  SHARD_RETURN_IF_ERROR(CheckPeer(to, message, "send to"));
  std::shared_ptr<ShmSender> sender = options_.sender(to);
  if (sender == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("no shared-memory channel to device ", to));
  }
  return lend ? LendVia(std::move(sender), to, message, data)
              : SendVia(*sender, to, message, data);
}

absl::Status ShmPeerTransport::Recv(int64_t from, const PeerMessage& message,
                                    absl::Span<uint8_t> out) {
  SHARD_RETURN_IF_ERROR(CheckPeer(from, message, "receive from"));
  std::shared_ptr<ShmReceiver> receiver = options_.receiver(from);
  if (receiver == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("no shared-memory channel from device ", from));
  }
  return TakeVia(*receiver, from, message, out, nullptr);
}

absl::Status ShmPeerTransport::Lend(int64_t to, const PeerMessage& message,
                                    absl::Span<const uint8_t> data) {
  return Post(to, message, data, /*lend=*/true);
}

absl::Status ShmPeerTransport::Settle(bool abandon) {
  std::map<ShmSender*, Lent> lent;
  {
    absl::MutexLock lock(&mu_);
    lent.swap(lent_);
  }
  const absl::Time deadline =
      std::min(options_.deadline, absl::Now() + options_.collective_timeout);
  absl::Status first;
  for (auto& [channel, l] : lent) {
    absl::Status s = channel->Settle(&l.tickets, abandon || !first.ok(),
                                     deadline, options_.aborted);
    if (s.code() == absl::StatusCode::kDeadlineExceeded) {
      s = absl::DeadlineExceededError(
          absl::StrCat("timed out waiting for ", channel->peer(), " to read ",
                       "the messages this device lent it, in job ",
                       options_.job_id, ": ", s.message()));
    }
    first.Update(s);
  }
  return first;
}

absl::Status ShmPeerTransport::LendVia(std::shared_ptr<ShmSender> sender,
                                       int64_t to, const PeerMessage& message,
                                       absl::Span<const uint8_t> data) {
  ShmSender& channel = *sender;
  return SendThrough(sender, channel, /*lend=*/true, to, message, data);
}

absl::Status ShmPeerTransport::SendVia(ShmSender& sender, int64_t to,
                                       const PeerMessage& message,
                                       absl::Span<const uint8_t> data) {
  return SendThrough(nullptr, sender, /*lend=*/false, to, message, data);
}

absl::Status ShmPeerTransport::SendThrough(
    const std::shared_ptr<ShmSender>& owner, ShmSender& sender, bool lend,
    int64_t to, const PeerMessage& message, absl::Span<const uint8_t> data) {
  SHARD_RETURN_IF_ERROR(CheckPeer(to, message, "send to"));
  const ShmMessageKey key{options_.job_id, options_.device, to, message.seq,
                          message.step};
  // A wait for room is bounded like a receive: a receiver that drains
  // nothing for a whole collective timeout is stuck.
  const absl::Time deadline =
      std::min(options_.deadline, absl::Now() + options_.collective_timeout);
  absl::Status s;
  if (lend) {
    std::vector<ShmLentTicket> tickets;
    s = sender.Lend(key, *message.fingerprint, data, deadline, options_.aborted,
                    &tickets);
    if (!tickets.empty()) {
      absl::MutexLock lock(&mu_);
      Lent& l = lent_[&sender];
      l.sender = owner;
      l.tickets.insert(l.tickets.end(), tickets.begin(), tickets.end());
    }
  } else {
    s = sender.Send(key, *message.fingerprint, data, deadline,
                    options_.aborted);
  }
  if (s.code() == absl::StatusCode::kUnavailable) {
    return absl::UnavailableError(
        absl::StrCat("cannot send to device ", to, " (", sender.peer(), ") in ",
                     message.fingerprint->text, ": ", s.message()));
  }
  if (s.code() == absl::StatusCode::kDeadlineExceeded) {
    return absl::DeadlineExceededError(absl::StrCat(
        "timed out sending to device ", to, " (", sender.peer(), ") in ",
        message.fingerprint->text, ", collective #", message.seq, " of job ",
        options_.job_id, ": ", s.message()));
  }
  return s;
}

absl::Status ShmPeerTransport::TakeVia(
    ShmReceiver& receiver, int64_t from, const PeerMessage& message,
    absl::Span<uint8_t> out, const std::function<absl::Status()>& idle) {
  SHARD_RETURN_IF_ERROR(CheckPeer(from, message, "receive from"));
  const ShmMessageKey key{options_.job_id, from, options_.device, message.seq,
                          message.step};
  const absl::Time deadline =
      std::min(options_.deadline, absl::Now() + options_.collective_timeout);
  absl::Status s = receiver.Take(key, *message.fingerprint, out, deadline,
                                 options_.aborted, idle);
  if (s.code() == absl::StatusCode::kUnavailable) {
    return absl::UnavailableError(absl::StrCat(
        "lost device ", from, " (", receiver.peer(), ") while waiting in ",
        message.fingerprint->text, ": ", s.message()));
  }
  if (s.code() == absl::StatusCode::kDeadlineExceeded) {
    return absl::DeadlineExceededError(absl::StrCat(
        "timed out waiting for device ", from, " (", receiver.peer(), ") in ",
        message.fingerprint->text, ", collective #", message.seq, " of job ",
        options_.job_id, "; it never arrived"));
  }
  return s;
}

}  // namespace shardmap
