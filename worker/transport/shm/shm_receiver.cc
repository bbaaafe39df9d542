#include "worker/transport/shm/shm_receiver.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/status_util.h"

namespace shardmap {
namespace {

constexpr size_t kFinishedJobsKept = 4096;
// Bytes copied out per step, so the writer can refill behind the reader.
constexpr size_t kReadStep = 256 << 10;
// A claim no real message makes: the channel is corrupt.
constexpr uint64_t kMaxRecordBytes = uint64_t{1} << 40;
constexpr uint32_t kMaxNameBytes = 1 << 20;

absl::Status Mismatch(const Fingerprint& expected, const ShmMessageKey& key,
                      const std::string& theirs) {
  return CollectiveMismatchError(expected, std::get<1>(key), theirs,
                                 std::get<3>(key));
}

std::string Describe(const ShmMessageKey& key) {
  return absl::StrCat("device ", std::get<1>(key), " as collective #",
                      std::get<3>(key), " of the job");
}

}  // namespace

ShmReceiver::ShmReceiver(std::unique_ptr<ShmRing> ring, std::string peer,
                         CrossMemory* memory, pid_t sender_pid)
    : ring_(std::move(ring)),
      peer_(std::move(peer)),
      memory_(memory),
      sender_pid_(sender_pid),
      slots_(ring_->lent_area()) {}

size_t ShmReceiver::Pending() {
  absl::MutexLock lock(&mu_);
  return stash_.size() + (ring_->Readable() > 0 ? 1 : 0);
}

void ShmReceiver::ForgetJob(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  for (auto it = stash_.lower_bound(
           ShmMessageKey{job_id, INT64_MIN, INT64_MIN, 0, 0});
       it != stash_.end() && std::get<0>(it->first) == job_id;) {
    // The one being filled is dropped by the pump when it is complete.
    it = it->second.complete ? stash_.erase(it) : std::next(it);
  }
  if (finished_.insert(job_id).second) {
    finished_order_.push_back(job_id);
    if (finished_order_.size() > kFinishedJobsKept) {
      finished_.erase(finished_order_.front());
      finished_order_.pop_front();
    }
  }
}

absl::Status ShmReceiver::MismatchLocked(const ShmMessageKey& key,
                                         const Fingerprint& expected) {
  const auto& [job, from, to, seq, step] = key;
  for (auto it = stash_.lower_bound(ShmMessageKey{job, from, to, seq, 0});
       it != stash_.end() && std::get<0>(it->first) == job &&
       std::get<1>(it->first) == from && std::get<2>(it->first) == to &&
       std::get<3>(it->first) == seq;
       ++it) {
    if (it->second.fingerprint != expected.hash) {
      return Mismatch(expected, key, it->second.fingerprint_text);
    }
  }
  return absl::OkStatus();
}

absl::Status ShmReceiver::Deliver(std::map<ShmMessageKey, Stashed>::iterator it,
                                  const ShmMessageKey& key,
                                  const Fingerprint& expected,
                                  absl::Span<uint8_t> out) {
  Stashed m = std::move(it->second);
  stash_.erase(it);
  if (!m.error.ok()) return m.error;
  if (m.fingerprint != expected.hash) {
    return Mismatch(expected, key, m.fingerprint_text);
  }
  if (m.data.size() != out.size()) {
    return MessageSizeError(expected, std::get<1>(key), m.data.size(),
                            out.size());
  }
  if (!out.empty()) std::memcpy(out.data(), m.data.data(), out.size());
  return absl::OkStatus();
}

absl::Status ShmReceiver::Take(const ShmMessageKey& key,
                               const Fingerprint& expected,
                               absl::Span<uint8_t> out, absl::Time deadline,
                               const std::function<absl::Status()>& aborted,
                               const std::function<absl::Status()>& idle) {
  absl::MutexLock lock(&mu_);
  for (;;) {
    auto it = stash_.find(key);
    if (it != stash_.end() && it->second.complete) {
      return Deliver(it, key, expected, out);
    }
    if (absl::Status s = MismatchLocked(key, expected); !s.ok()) return s;
    if (!broken_.ok()) return broken_;
    if (!pumping_) {
      pumping_ = true;
      bool done = false;
      mu_.Unlock();
      absl::Status s = Pump(key, expected, out, deadline, aborted, idle, &done);
      mu_.Lock();
      pumping_ = false;
      changed_.SignalAll();
      if (!s.ok() || (done && stash_.count(key) == 0)) return s;
      continue;  // stashed (a mismatch), or another's message came
    }
    // The callbacks may take other locks: call them without ours.
    mu_.Unlock();
    absl::Status s = aborted ? aborted() : absl::OkStatus();
    if (s.ok() && idle) s = idle();
    mu_.Lock();
    if (!s.ok()) return s;
    const absl::Time now = absl::Now();
    if (now >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("nothing arrived from ", peer_, " for ", Describe(key)));
    }
    changed_.WaitWithDeadline(&mu_,
                              std::min(deadline, now + ShmRing::kWaitSlice));
  }
}

absl::Status ShmReceiver::ReadFully(
    uint8_t* dst, size_t n, size_t* got, absl::Time deadline,
    const std::function<absl::Status()>& aborted,
    const std::function<absl::Status()>& idle) {
  while (*got < n) {
    const size_t r = ring_->Read(dst != nullptr ? dst + *got : nullptr,
                                 std::min(n - *got, kReadStep));
    *got += r;
    if (r > 0) continue;
    absl::Status s = ring_->Wait(deadline, aborted, idle);
    if (s.code() == absl::StatusCode::kUnavailable) {
      return absl::UnavailableError(
          absl::StrCat("lost ", peer_, ": ", s.message()));
    }
    if (s.code() == absl::StatusCode::kDeadlineExceeded) {
      return absl::DeadlineExceededError(
          absl::StrCat("nothing more arrived from ", peer_));
    }
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status ShmReceiver::CopyLent(uint8_t* dst) {
  const Cursor& c = cursor_;
  const std::string what =
      absl::StrCat(c.head.data_bytes, " bytes lent by ", peer_);
  if (dst == nullptr) {  // a finished job's: only let it go
    slots_.Release(c.ref.slot, c.ref.generation);
    return absl::OkStatus();
  }
  if (memory_ == nullptr || sender_pid_ <= 0) {
    slots_.Release(c.ref.slot, c.ref.generation);
    return absl::InternalError(absl::StrCat(
        what, ", which this channel cannot read (it did not offer to)"));
  }
  if (!slots_.Claim(c.ref.slot, c.ref.generation)) {
    return absl::AbortedError(absl::StrCat(
        "the ", what, " were withdrawn: its side of the collective failed"));
  }
  absl::Status s = memory_->Read(
      sender_pid_, c.ref.address,
      absl::MakeSpan(dst, static_cast<size_t>(c.head.data_bytes)));
  slots_.Release(c.ref.slot, c.ref.generation);
  if (!s.ok()) {
    return absl::UnavailableError(
        absl::StrCat("cannot read the ", what, ": ", s.message()));
  }
  return absl::OkStatus();
}

absl::Status ShmReceiver::Pump(const ShmMessageKey& key,
                               const Fingerprint& expected,
                               absl::Span<uint8_t> out, absl::Time deadline,
                               const std::function<absl::Status()>& aborted,
                               const std::function<absl::Status()>& idle,
                               bool* done) {
  struct Active {
    ShmRing* ring;
    explicit Active(ShmRing* r) : ring(r) { ring->SetReaderActive(true); }
    ~Active() { ring->SetReaderActive(false); }
  } active(ring_.get());
  Cursor& c = cursor_;
  for (;;) {
    if (c.stage == Cursor::kHead) {
      // Only between records may the wait end to look elsewhere.
      absl::Status s = ReadFully(reinterpret_cast<uint8_t*>(&c.head),
                                 sizeof(c.head), &c.head_got, deadline, aborted,
                                 c.head_got == 0 ? idle : nullptr);
      if (!s.ok()) return s;
      if ((c.head.magic != kShmRecordMagic && c.head.magic != kShmLentMagic) ||
          c.head.data_bytes > kMaxRecordBytes ||
          c.head.job_bytes > kMaxNameBytes ||
          c.head.text_bytes > kMaxNameBytes) {
        absl::MutexLock lock(&mu_);
        broken_ = absl::InternalError(absl::StrCat(
            "malformed record on the shared-memory channel from ", peer_));
        return broken_;
      }
      c.names.assign(c.head.job_bytes + c.head.text_bytes, '\0');
      c.names_got = 0;
      c.stage = Cursor::kNames;
    }
    if (c.stage == Cursor::kNames) {
      absl::Status s =
          ReadFully(reinterpret_cast<uint8_t*>(c.names.data()), c.names.size(),
                    &c.names_got, deadline, aborted, nullptr);
      if (!s.ok()) return s;
      c.ref_got = 0;
      c.stage = Cursor::kRef;
    }
    if (c.stage == Cursor::kRef) {
      if (c.head.magic == kShmLentMagic) {
        absl::Status s =
            ReadFully(reinterpret_cast<uint8_t*>(&c.ref), sizeof(c.ref),
                      &c.ref_got, deadline, aborted, nullptr);
        if (!s.ok()) return s;
      }
      std::string job = c.names.substr(0, c.head.job_bytes);
      c.key = ShmMessageKey{std::move(job), c.head.from_device,
                            c.head.to_device, c.head.seq, c.head.step};
      c.data_got = 0;
      c.stage = Cursor::kData;
      absl::MutexLock lock(&mu_);
      if (finished_.count(std::get<0>(c.key)) > 0) {
        c.sink = Cursor::kDiscard;
      } else if (c.key == key && c.head.fingerprint == expected.hash &&
                 c.head.data_bytes == out.size()) {
        c.sink = Cursor::kOut;
      } else {
        c.sink = Cursor::kStash;
        Stashed& m = stash_[c.key];  // a duplicate replaces the first
        m.fingerprint = c.head.fingerprint;
        m.fingerprint_text = c.names.substr(c.head.job_bytes);
        m.data.assign(c.head.data_bytes, '\0');
        m.complete = false;
      }
    }
    uint8_t* dst = nullptr;
    if (c.sink == Cursor::kOut) {
      dst = out.data();
    } else if (c.sink == Cursor::kStash) {
      absl::MutexLock lock(&mu_);
      dst = reinterpret_cast<uint8_t*>(stash_[c.key].data.data());
    }
    absl::Status s;
    if (c.head.magic == kShmLentMagic) {
      // One copy, nothing to wait for: the cursor moves on whatever
      // happens, and a stashed message keeps what went wrong.
      s = CopyLent(dst);
      if (c.sink == Cursor::kStash) {
        absl::MutexLock lock(&mu_);
        stash_[c.key].error = s;
        s = absl::OkStatus();
      }
      if (!s.ok()) {
        c.stage = Cursor::kHead;
        c.head_got = 0;
        return s;
      }
    } else {
      size_t got = c.data_got;
      s = ReadFully(dst, c.head.data_bytes, &got, deadline, aborted, nullptr);
      c.data_got = got;
    }
    if (!s.ok()) {
      // `out` is the caller's only until we return.
      if (c.sink == Cursor::kOut) c.sink = Cursor::kDiscard;
      return s;
    }
    c.stage = Cursor::kHead;
    c.head_got = 0;
    const bool mine = c.key == key;
    if (c.sink == Cursor::kStash) {
      absl::MutexLock lock(&mu_);
      auto it = stash_.find(c.key);
      it->second.complete = true;
      if (finished_.count(std::get<0>(c.key)) > 0) stash_.erase(it);
      changed_.SignalAll();
      // Another message of our collective with another fingerprint: the
      // devices called different collectives; fail now, not at the timeout.
      if (!mine) SHARD_RETURN_IF_ERROR(MismatchLocked(key, expected));
    }
    if (mine && c.sink != Cursor::kDiscard) {
      *done = true;
      return absl::OkStatus();
    }
  }
}

}  // namespace shardmap
