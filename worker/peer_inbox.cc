#include "worker/peer_inbox.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace shardmap {
namespace {
constexpr size_t kFinishedJobsKept = 4096;
constexpr absl::Duration kAbortPoll = absl::Milliseconds(20);
}  // namespace

absl::Status PeerInbox::Deliver(v1::PeerFrame&& frame) {
  absl::MutexLock lock(&mu_);
  if (finished_.count(frame.job_id()) > 0) return absl::OkStatus();
  Message& m = messages_[Key{frame.job_id(), frame.from_device(), frame.seq(),
                             frame.step()}];
  if (m.received == 0 && m.data.empty()) {
    m.total = frame.total_bytes();
    m.fingerprint = frame.fingerprint();
    if (frame.offset() == 0 && frame.data().size() == m.total) {
      // A message in one frame: keep the frame's buffer, no copy.
      m.fingerprint_text = std::move(*frame.mutable_fingerprint_text());
      m.data = std::move(*frame.mutable_data());
      m.received = m.total;
      return absl::OkStatus();
    }
    m.data.resize(m.total);
  }
  if (frame.total_bytes() != m.total ||
      frame.offset() + frame.data().size() > m.total ||
      frame.offset() != m.received) {
    return absl::InvalidArgumentError(absl::StrCat(
        "peer frame of job ", frame.job_id(), " from device ",
        frame.from_device(), " (seq ", frame.seq(), ", step ", frame.step(),
        ") does not fit its message: offset ", frame.offset(), ", ",
        frame.data().size(), " bytes, message of ", m.total, " bytes with ",
        m.received, " received"));
  }
  if (!frame.fingerprint_text().empty()) {
    m.fingerprint_text = std::move(*frame.mutable_fingerprint_text());
  }
  std::memcpy(m.data.data() + frame.offset(), frame.data().data(),
              frame.data().size());
  m.received += frame.data().size();
  return absl::OkStatus();
}

void PeerInbox::StreamOpened(const std::string& address) {
  absl::MutexLock lock(&mu_);
  ++open_streams_[address];
  lost_.erase(address);
}

void PeerInbox::StreamLost(const std::string& address) {
  absl::MutexLock lock(&mu_);
  // A sender that reconnected before its old stream's end was noticed
  // still has a live stream: it is not lost.
  if (--open_streams_[address] <= 0) {
    open_streams_.erase(address);
    lost_.insert(address);
  }
}

absl::Status PeerInbox::Take(const Want& want, absl::Span<uint8_t> out,
                             absl::Time deadline,
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
        return absl::InvalidArgumentError(absl::StrCat(
            "collective mismatch: this device called ", want.fingerprint->text,
            " but device ", want.from_device, " called ", theirs,
            " as collective #", want.seq,
            " of the job; every device must call the same collectives in "
            "the same order"));
      }
      if (m.total != out.size()) {
        const uint64_t total = m.total;
        messages_.erase(it);
        return absl::InvalidArgumentError(absl::StrCat(
            "in ", want.fingerprint->text, ", device ", want.from_device,
            " sent ", total, " bytes where ", out.size(), " were expected"));
      }
      if (!out.empty()) std::memcpy(out.data(), m.data.data(), out.size());
      messages_.erase(it);
      return absl::OkStatus();
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
        return absl::InvalidArgumentError(absl::StrCat(
            "collective mismatch: this device called ", want.fingerprint->text,
            " but device ", want.from_device, " called ",
            m->second.fingerprint_text, " as collective #", want.seq,
            " of the job; every device must call the same collectives in "
            "the same order"));
      }
    }
    if (lost_.count(want.from_address) > 0) {
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
