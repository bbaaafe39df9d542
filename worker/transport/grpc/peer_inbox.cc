#include "worker/transport/grpc/peer_inbox.h"

#include "absl/strings/str_cat.h"
#include "core/status_util.h"

namespace shardmap {
namespace {
constexpr size_t kFinishedJobsKept = 4096;
constexpr absl::Duration kAbortPoll = absl::Milliseconds(20);
}  // namespace

absl::Status PeerInbox::Deliver(DecodedFrame&& frame) {
  const v1::PeerFrame& h = frame.header;
  absl::MutexLock lock(&mu_);
  if (finished_.count(h.job_id()) > 0) return absl::OkStatus();
  Message& m = messages_[Key{h.job_id(), h.from_device(), h.seq(), h.step()}];
  if (m.fragments.empty() && m.received == 0) {
    m.total = h.total_bytes();
    m.fingerprint = h.fingerprint();
  }
  const uint64_t size = frame.payload.size();
  if (h.total_bytes() != m.total || h.offset() != m.received ||
      size > m.total - m.received) {
    return absl::InvalidArgumentError(
        absl::StrCat("peer frame of job ", h.job_id(), " from device ",
                     h.from_device(), " (seq ", h.seq(), ", step ", h.step(),
                     ") does not fit its message: offset ", h.offset(), ", ",
                     size, " bytes, message of ", m.total, " bytes with ",
                     m.received, " received"));
  }
  if (!h.fingerprint_text().empty()) {
    m.fingerprint_text = std::move(*frame.header.mutable_fingerprint_text());
  }
  if (size > 0) m.fragments.push_back(std::move(frame.payload));
  m.received += size;
  return absl::OkStatus();
}

void PeerInbox::StreamOpened(const std::string& address, uint64_t incarnation) {
  absl::MutexLock lock(&mu_);
  const Sender sender{address, incarnation};
  ++open_streams_[sender];
  lost_.erase(sender);
}

void PeerInbox::StreamLost(const std::string& address, uint64_t incarnation) {
  absl::MutexLock lock(&mu_);
  const Sender sender{address, incarnation};
  // A sender that reconnected before its old stream's end was noticed
  // still has a live stream: it is not lost.
  if (--open_streams_[sender] <= 0) {
    open_streams_.erase(sender);
    lost_.insert(sender);
  }
}

bool PeerInbox::LostLocked(const Want& want) const {
  if (want.from_incarnation != 0) {
    return lost_.count(Sender{want.from_address, want.from_incarnation}) > 0;
  }
  // Any process at the address: lost when one was lost and none is open.
  const Sender first{want.from_address, 0};
  auto lost = lost_.lower_bound(first);
  auto open = open_streams_.lower_bound(first);
  return lost != lost_.end() && lost->first == want.from_address &&
         (open == open_streams_.end() ||
          open->first.first != want.from_address);
}

absl::Status PeerInbox::Take(const Want& want, absl::Span<uint8_t> out,
                             absl::Time deadline,
                             const std::function<absl::Status()>& aborted) {
  SHARD_ASSIGN_OR_RETURN(std::vector<PeerPayload> fragments,
                         Wait(want, out.size(), deadline, aborted));
  // The copy happens outside the lock: other streams keep delivering.
  uint8_t* at = out.data();
  for (const PeerPayload& f : fragments) {
    f.CopyTo(at);
    at += f.size();
  }
  return absl::OkStatus();
}

absl::Status PeerInbox::TakeChunks(
    const Want& want, size_t size, const PeerTransport::ChunkConsumer& consume,
    absl::Time deadline, const std::function<absl::Status()>& aborted) {
  SHARD_ASSIGN_OR_RETURN(std::vector<PeerPayload> fragments,
                         Wait(want, size, deadline, aborted));
  for (const PeerPayload& f : fragments) {
    for (const grpc::Slice& s : f.slices()) {
      if (s.size() > 0) consume(absl::MakeConstSpan(s.begin(), s.size()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<PeerPayload>> PeerInbox::Wait(
    const Want& want, size_t size, absl::Time deadline,
    const std::function<absl::Status()>& aborted) {
  const Key key{want.job_id, want.from_device, want.seq, want.step};
  absl::MutexLock lock(&mu_);
  while (true) {
    auto it = messages_.find(key);
    if (it != messages_.end() && it->second.received == it->second.total) {
      Message& m = it->second;
      if (m.fingerprint != want.fingerprint->hash) {
        const std::string theirs = m.fingerprint_text;
        messages_.erase(it);
        return CollectiveMismatchError(*want.fingerprint, want.from_device,
                                       theirs, want.seq);
      }
      if (m.total != size) {
        const uint64_t total = m.total;
        messages_.erase(it);
        return MessageSizeError(*want.fingerprint, want.from_device, total,
                                size);
      }
      std::vector<PeerPayload> fragments = std::move(m.fragments);
      messages_.erase(it);
      return fragments;
    }
    // A message of the same collective (same sender and number) with
    // another fingerprint means the devices called different collectives,
    // maybe with different message patterns: fail now, not at the timeout.
    for (auto m = messages_.lower_bound(
             Key{want.job_id, want.from_device, want.seq, 0});
         m != messages_.end() && std::get<0>(m->first) == want.job_id &&
         std::get<1>(m->first) == want.from_device &&
         std::get<2>(m->first) == want.seq;
         ++m) {
      if (m->second.fingerprint != want.fingerprint->hash &&
          !m->second.fingerprint_text.empty()) {
        return CollectiveMismatchError(*want.fingerprint, want.from_device,
                                       m->second.fingerprint_text, want.seq);
      }
    }
    if (LostLocked(want)) {
      return absl::UnavailableError(absl::StrCat(
          "lost the stream from worker ", want.from_address, " (device ",
          want.from_device, ") while waiting in ", want.fingerprint->text));
    }
    if (absl::Status s = aborted(); !s.ok()) return s;
    const absl::Time now = absl::Now();
    if (now >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "timed out waiting for device ", want.from_device, " (worker ",
          want.from_address, ") in ", want.fingerprint->text, ", collective #",
          want.seq, " of job ", want.job_id));
    }
    auto arrived = [this, &key]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      auto i = messages_.find(key);
      return i != messages_.end() && i->second.received == i->second.total;
    };
    mu_.AwaitWithDeadline(absl::Condition(&arrived),
                          std::min(deadline, now + kAbortPoll));
  }
}

void PeerInbox::ForgetJob(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  for (auto it = messages_.lower_bound(Key{job_id, INT64_MIN, 0, 0});
       it != messages_.end() && std::get<0>(it->first) == job_id;) {
    it = messages_.erase(it);
  }
  if (finished_.insert(job_id).second) {
    finished_order_.push_back(job_id);
    if (finished_order_.size() > kFinishedJobsKept) {
      finished_.erase(finished_order_.front());
      finished_order_.pop_front();
    }
  }
}

}  // namespace shardmap
