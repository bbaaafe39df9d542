#include "worker/transport/shm/shm_sender.h"

#include <sched.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace shardmap {
namespace {

// The head, job id and fingerprint text of one message.
std::string EncodeHead(const ShmMessageKey& key, const Fingerprint& fingerprint,
                       size_t data_bytes, uint32_t magic = kShmRecordMagic) {
  ShmRecordHead head;
  head.magic = magic;
  const std::string& job = std::get<0>(key);
  head.job_bytes = static_cast<uint32_t>(job.size());
  head.text_bytes = static_cast<uint32_t>(fingerprint.text.size());
  head.from_device = std::get<1>(key);
  head.to_device = std::get<2>(key);
  head.seq = std::get<3>(key);
  head.step = std::get<4>(key);
  head.fingerprint = fingerprint.hash;
  head.data_bytes = data_bytes;
  std::string out(sizeof(head), '\0');
  std::memcpy(out.data(), &head, sizeof(head));
  out += job;
  out += fingerprint.text;
  return out;
}

// How long Settle waits, once it withdraws, for buffers being copied.
constexpr absl::Duration kReadingGrace = absl::Seconds(5);

// Every slot, the lowest handed out first.
std::vector<int> AllSlots() {
  std::vector<int> slots;
  for (int i = kShmLentSlots - 1; i >= 0; --i) slots.push_back(i);
  return slots;
}

absl::Span<const uint8_t> AsBytes(const std::string& s) {
  return absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(s.data()),
                             s.size());
}

}  // namespace

ShmSender::ShmSender(std::unique_ptr<ShmRing> ring, Options options)
    : ring_(std::move(ring)),
      options_(std::move(options)),
      slots_(ring_->lent_area()),
      free_slots_(AllSlots()),
      generations_(kShmLentSlots, 0) {}

ShmSender::~ShmSender() {
  std::thread pusher;
  {
    absl::MutexLock lock(&mu_);  // under mu_, so the idle pusher wakes
    stop_ = true;
    pusher = std::move(pusher_);
  }
  if (pusher.joinable()) pusher.join();
}

bool ShmSender::Usable() {
  {
    absl::MutexLock lock(&mu_);
    if (!failed_.ok()) return false;
  }
  return ring_->PeerAliveLately();
}

size_t ShmSender::SpilledBytes() {
  absl::MutexLock lock(&mu_);
  return spill_bytes_;
}

void ShmSender::SpillLocked(const absl::Span<const uint8_t> (&parts)[2],
                            size_t offset, std::vector<ShmLentTicket>* borrow) {
  auto set_aside = [this](Pending p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (p.size() == 0) return;
    spill_bytes_ += p.size();
    spill_.push_back(std::move(p));
  };
  const size_t head_skip = std::min(offset, parts[0].size());
  const size_t data_skip = offset - head_skip;
  Pending rest;
  rest.owned.append(reinterpret_cast<const char*>(parts[0].data()) + head_skip,
                    parts[0].size() - head_skip);
  if (borrow == nullptr) {
    rest.owned.append(
        reinterpret_cast<const char*>(parts[1].data()) + data_skip,
        parts[1].size() - data_skip);
    set_aside(std::move(rest));
  } else {
    set_aside(std::move(rest));
    Pending lent;
    lent.borrowed = parts[1].subspan(data_skip);
    if (!lent.borrowed.empty()) {
      lent.push = ++pushes_;
      ShmLentTicket t;
      t.push = lent.push;
      borrow->push_back(t);
      set_aside(std::move(lent));
    }
  }
  if (!pusher_.joinable()) pusher_ = std::thread([this] { PushSpilled(); });
}

absl::Status ShmSender::Send(const ShmMessageKey& key,
                             const Fingerprint& fingerprint,
                             absl::Span<const uint8_t> data,
                             absl::Time deadline,
                             const std::function<absl::Status()>& aborted) {
  return WriteRecord(EncodeHead(key, fingerprint, data.size()), data, deadline,
                     aborted);
}

absl::Status ShmSender::WriteRecord(
    const std::string& head, absl::Span<const uint8_t> data,
    absl::Time deadline, const std::function<absl::Status()>& aborted,
    std::vector<ShmLentTicket>* borrow) {
  const absl::Span<const uint8_t> parts[2] = {AsBytes(head), data};
  const size_t total = head.size() + data.size();
  absl::MutexLock lock(&mu_);
  if (failed_.ok() && !ring_->PeerAliveLately()) {
    failed_ = absl::UnavailableError(absl::StrCat(
        options_.peer, " is gone: it unmapped the channel (it exited)"));
  }
  if (!failed_.ok()) return failed_;
  if (!spill_.empty()) {
    // Behind spilled bytes: the message must follow them. Past the cap,
    // wait for the pusher to catch up first.
    while (spill_bytes_ > options_.max_spill_bytes) {
      if (absl::Status s = aborted ? aborted() : absl::OkStatus(); !s.ok()) {
        return s;
      }
      if (!failed_.ok()) return failed_;
      if (absl::Now() >= deadline) {
        return absl::DeadlineExceededError(
            absl::StrCat("over ", options_.max_spill_bytes,
                         " bytes wait unread for ", options_.peer));
      }
      mu_.AwaitWithDeadline(
          absl::Condition(
              +[](ShmSender* s) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                return s->spill_bytes_ <= s->options_.max_spill_bytes ||
                       !s->failed_.ok();
              },
              this),
          std::min(deadline, absl::Now() + ShmRing::kWaitSlice));
    }
    if (spill_.empty()) {
      // The pusher finished meanwhile; write in place below.
    } else {
      SpillLocked(parts, 0, borrow);
      return absl::OkStatus();
    }
  }
  size_t done = 0;
  while (done < total) {
    const bool in_head = done < head.size();
    const absl::Span<const uint8_t> part = in_head ? parts[0] : parts[1];
    const size_t at = in_head ? done : done - head.size();
    const size_t n = ring_->Write(part.data() + at, part.size() - at);
    done += n;
    if (n > 0 || done == total) continue;
    if (!ring_->ReaderActive()) {  // nobody draining: set the rest aside
      SpillLocked(parts, done, borrow);
      return absl::OkStatus();
    }
    absl::Status s = ring_->Wait(deadline, aborted);
    if (s.code() == absl::StatusCode::kUnavailable) {
      failed_ = absl::UnavailableError(
          absl::StrCat(options_.peer, " is gone: ", s.message()));
      return failed_;
    }
    if (!s.ok()) {
      if (done > 0) SpillLocked(parts, done, borrow);  // keep the ring whole
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status ShmSender::Lend(const ShmMessageKey& key,
                             const Fingerprint& fingerprint,
                             absl::Span<const uint8_t> data,
                             absl::Time deadline,
                             const std::function<absl::Status()>& aborted,
                             std::vector<ShmLentTicket>* tickets) {
  ShmLentTicket t;
  if (options_.lend && data.size() >= options_.min_lent_bytes) {
    absl::MutexLock lock(&mu_);
    if (!free_slots_.empty()) {
      t.slot = free_slots_.back();
      free_slots_.pop_back();
      // 30 bits of generation (shm_lent.h), never 0.
      uint32_t& g = generations_[t.slot];
      g = (g + 1) & 0x3fffffff;
      if (g == 0) g = 1;
      t.generation = g;
    }
  }
  if (t.slot < 0) {
    return WriteRecord(EncodeHead(key, fingerprint, data.size()), data,
                       deadline, aborted, tickets);
  }
  slots_.Post(t);
  tickets->push_back(t);
  const ShmLentRef ref{reinterpret_cast<uint64_t>(data.data()),
                       static_cast<uint32_t>(t.slot), t.generation};
  std::string head = EncodeHead(key, fingerprint, data.size(), kShmLentMagic);
  head.append(reinterpret_cast<const char*>(&ref), sizeof(ref));
  return WriteRecord(head, {}, deadline, aborted);
}

absl::Status ShmSender::Settle(std::vector<ShmLentTicket>* tickets,
                               bool abandon, absl::Time deadline,
                               const std::function<absl::Status()>& aborted) {
  auto release = [this](const ShmLentTicket& t) {
    absl::MutexLock lock(&mu_);
    free_slots_.push_back(t.slot);
  };
  std::vector<uint64_t> pushes;
  tickets->erase(std::remove_if(tickets->begin(), tickets->end(),
                                [&pushes](const ShmLentTicket& t) {
                                  if (t.push == 0) return false;
                                  pushes.push_back(t.push);
                                  return true;
                                }),
                 tickets->end());
  absl::Status result = SettlePushes(pushes, abandon);
  if (!result.ok()) abandon = true;
  const absl::Time spin_until = absl::Now() + ShmRing::kSpin;
  absl::Time give_up = absl::InfiniteFuture();
  for (;;) {
    const uint32_t seen = slots_.released_seq();
    std::vector<ShmLentTicket> left;
    for (const ShmLentTicket& t : *tickets) {
      if (slots_.Find(t) == ShmLentSlots::Where::kDone ||
          (abandon && slots_.Revoke(t))) {
        release(t);
      } else {
        left.push_back(t);
      }
    }
    tickets->swap(left);
    if (tickets->empty()) return result;
    // The reader is usually at it already: poll a little (yielding the
    // core) before the checks and a futex sleep.
    if (absl::Now() < spin_until) {
      sched_yield();
      continue;
    }
    if (!ring_->PeerAlive()) {  // nobody reads them any more
      for (const ShmLentTicket& t : *tickets) release(t);
      tickets->clear();
      if (!result.ok() || abandon) return result;
      return absl::UnavailableError(absl::StrCat(
          options_.peer, " is gone: it unmapped the channel (it exited)"));
    }
    const absl::Time now = absl::Now();
    if (!abandon) {
      absl::Status s = aborted ? aborted() : absl::OkStatus();
      if (s.ok() && now >= deadline) {
        s = absl::DeadlineExceededError(absl::StrCat(
            tickets->size(), " lent messages still unread by ", options_.peer));
      }
      if (!s.ok()) {
        result = s;
        abandon = true;
        continue;
      }
    } else if (give_up == absl::InfiniteFuture()) {
      // Only buffers being copied right now are left: a live reader is
      // done with them within moments. One that is not (stopped) keeps
      // their slots, which are never handed out again.
      give_up = now + kReadingGrace;
    } else if (now >= give_up) {
      tickets->clear();
      return result;
    }
    slots_.WaitForRelease(
        seen, abandon ? ShmRing::kWaitSlice
                      : std::min(ShmRing::kWaitSlice, deadline - now));
  }
}

bool ShmSender::AnyBorrowedLocked(const std::vector<uint64_t>& pushes) const {
  for (const Pending& p : spill_) {
    if (p.is_borrowed() &&
        std::find(pushes.begin(), pushes.end(), p.push) != pushes.end()) {
      return true;
    }
  }
  return false;
}

absl::Status ShmSender::SettlePushes(const std::vector<uint64_t>& pushes,
                                     bool abandon) {
  if (pushes.empty()) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  if (AnyBorrowedLocked(pushes)) {
    // The caller may reuse its buffers from now on: copy what the pusher
    // has not written yet aside, once it is not copying from one (one
    // bounded Write). Waiting for the receiver instead would tie this
    // step's end to the receiver's pace.
    auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !pushing_borrowed_;
    };
    mu_.Await(absl::Condition(&idle));
    for (Pending& p : spill_) {
      if (!p.is_borrowed() ||
          std::find(pushes.begin(), pushes.end(), p.push) == pushes.end()) {
        continue;
      }
      const size_t skip = &p == &spill_.front() ? front_done_ : 0;
      p.owned.assign(reinterpret_cast<const char*>(p.borrowed.data()) + skip,
                     p.borrowed.size() - skip);
      p.borrowed = {};
      p.push = 0;
      if (skip > 0) front_done_ = 0;
    }
  }
  return abandon ? absl::OkStatus() : failed_;
}

void ShmSender::PushSpilled() {
  auto stopped = [this] {
    return stop_ ? absl::CancelledError("the channel is closing")
                 : absl::OkStatus();
  };
  for (;;) {
    const uint8_t* from = nullptr;
    size_t n = 0;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !spill_.empty() || stop_;
      };
      mu_.Await(absl::Condition(&ready));  // Send and ~ShmSender signal
      if (stop_) return;
      const Pending& front = spill_.front();
      if (front_done_ == front.size()) {
        spill_.pop_front();
        front_done_ = 0;
        continue;
      }
      // The only writer: the room can only grow until we write.
      n = std::min(ring_->Writable(), front.size() - front_done_);
      if (n > 0) {
        from = front.data() + front_done_;
        pushing_borrowed_ = front.is_borrowed();
        // Counted out of the spill before the reader can see the bytes,
        // so SpilledBytes() is 0 by the time the receiver has them all.
        spill_bytes_ -= n;
      }
    }
    if (n > 0) {
      ring_->Write(from, n);
      absl::MutexLock lock(&mu_);
      front_done_ += n;
      pushing_borrowed_ = false;
      continue;
    }
    absl::Status s = ring_->Wait(absl::InfiniteFuture(), stopped);
    if (!s.ok()) {
      absl::MutexLock lock(&mu_);
      if (s.code() == absl::StatusCode::kUnavailable && failed_.ok()) {
        failed_ = absl::UnavailableError(
            absl::StrCat(options_.peer, " is gone: ", s.message()));
      }
      spill_.clear();
      spill_bytes_ = 0;
      front_done_ = 0;
      return;
    }
  }
}

}  // namespace shardmap
