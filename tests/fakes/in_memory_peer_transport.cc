#include "tests/fakes/in_memory_peer_transport.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "core/status_util.h"
#include "worker/transport/shm/cross_memory.h"
#include "worker/transport/shm/shm_peer_transport.h"
#include "worker/transport/shm/shm_receiver.h"
#include "worker/transport/shm/shm_sender.h"

namespace shardmap {

namespace {

// One message waiting in a mailbox: the payload and who sent it as what.
struct Letter {
  std::vector<uint8_t> payload;
  uint64_t fingerprint_hash = 0;
  std::string fingerprint_text;
};

// (sender, seq, step): what a Recv asks for.
using LetterKey = std::tuple<int64_t, uint64_t, uint32_t>;

std::string Describe(int64_t from, const PeerMessage& message) {
  return absl::StrCat("message (seq ", message.seq, ", step ", message.step,
                      ") from device ", from);
}

}  // namespace

// The messages addressed to one device. Send signals `arrived`; every Recv
// of the device waits on it for its own key.
struct InMemoryHub::Mailbox {
  absl::Mutex mu;
  absl::CondVar arrived;
  std::map<LetterKey, Letter> letters ABSL_GUARDED_BY(mu);
  absl::Status aborted ABSL_GUARDED_BY(mu);  // OK until the hub aborts
};

// Both ends of the channel from one device to another.
struct InMemoryHub::ShmPair {
  std::shared_ptr<ShmSender> sender;
  std::shared_ptr<ShmReceiver> receiver;
  absl::Status error;  // why the channel could not be made
};

bool InMemoryHub::UsesSharedMemory() {
  const char* mode = std::getenv("SHARDMAP_TEST_PEER_TRANSPORT");
  return mode != nullptr && std::string(mode) == "shm";
}

InMemoryHub::InMemoryHub(int64_t num_devices, absl::Duration recv_timeout)
    : num_devices_(num_devices),
      recv_timeout_(recv_timeout),
      shm_(UsesSharedMemory()) {
  for (int64_t d = 0; d < num_devices_; ++d) {
    mailboxes_.push_back(std::make_unique<Mailbox>());
  }
  if (!shm_) return;
  pairs_.resize(static_cast<size_t>(num_devices_ * num_devices_));
  for (int64_t d = 0; d < num_devices_; ++d) {
    ShmPeerTransport::Options o;
    o.job_id = "test-job";
    o.device = d;
    o.num_devices = num_devices_;
    o.collective_timeout = recv_timeout_;
    o.aborted = [this] { return AbortStatus(); };
    o.sender = [this, d](int64_t to) { return PairOf(d, to).sender; };
    o.receiver = [this, d](int64_t from) { return PairOf(from, d).receiver; };
    shm_endpoints_.push_back(std::make_unique<ShmPeerTransport>(std::move(o)));
  }
}

InMemoryHub::~InMemoryHub() = default;

InMemoryHub::ShmPair& InMemoryHub::PairOf(int64_t from, int64_t to) {
  absl::MutexLock lock(&shm_mu_);
  std::unique_ptr<ShmPair>& pair = pairs_[from * num_devices_ + to];
  if (pair == nullptr) {
    pair = std::make_unique<ShmPair>();
    auto writer = ShmRing::Create(kShmTestRingBytes);
    absl::StatusOr<std::unique_ptr<ShmRing>> reader =
        writer.ok() ? ShmRing::Attach((*writer)->name(), (*writer)->nonce(),
                                      kShmTestRingBytes)
                    : writer.status();
    if (writer.ok()) (*writer)->Unlink();
    if (!reader.ok()) {
      pair->error = reader.status();
    } else {
      ShmSender::Options options;
      options.peer = absl::StrCat("device ", to, "'s thread");
      options.lend = true;  // every message Lend is given
      options.min_lent_bytes = 1;
      pair->sender = std::make_shared<ShmSender>(*std::move(writer), options);
      pair->receiver = std::make_shared<ShmReceiver>(
          *std::move(reader), absl::StrCat("device ", from, "'s thread"),
          ProcessVmReader::Get(), getpid());
    }
  }
  return *pair;
}

absl::Status InMemoryHub::AbortStatus() const {
  absl::MutexLock lock(&shm_mu_);
  return abort_status_;
}

std::unique_ptr<InMemoryPeerTransport> InMemoryHub::Endpoint(int64_t device) {
  return std::make_unique<InMemoryPeerTransport>(this, device);
}

void InMemoryHub::Abort(const absl::Status& status) {
  const absl::Status reason =
      status.ok() ? absl::AbortedError("the job was aborted") : status;
  // One abort at a time, so that every mailbox keeps the same first reason.
  absl::MutexLock abort_lock(&abort_mu_);
  {
    absl::MutexLock lock(&shm_mu_);
    if (abort_status_.ok()) abort_status_ = reason;
  }
  for (const std::unique_ptr<Mailbox>& box : mailboxes_) {
    absl::MutexLock lock(&box->mu);
    if (box->aborted.ok()) box->aborted = reason;
    box->arrived.SignalAll();
  }
}

size_t InMemoryHub::PendingMessages() const {
  size_t pending = 0;
  for (const std::unique_ptr<Mailbox>& box : mailboxes_) {
    absl::MutexLock lock(&box->mu);
    pending += box->letters.size();
  }
  std::vector<ShmPair> pairs;  // counted outside shm_mu_
  {
    absl::MutexLock lock(&shm_mu_);
    for (const std::unique_ptr<ShmPair>& pair : pairs_) {
      if (pair != nullptr && pair->sender != nullptr) pairs.push_back(*pair);
    }
  }
  for (const ShmPair& pair : pairs) {
    pending +=
        pair.receiver->Pending() + (pair.sender->SpilledBytes() > 0 ? 1 : 0);
  }
  return pending;
}

absl::Status InMemoryHub::Send(int64_t from, int64_t to,
                               const PeerMessage& message,
                               absl::Span<const uint8_t> data) {
  if (from < 0 || from >= num_devices_ || to < 0 || to >= num_devices_) {
    return absl::InvalidArgumentError(
        absl::StrCat("device ", from, " sends to device ", to,
                     ": the mesh has devices 0 to ", num_devices_ - 1));
  }
  if (message.fingerprint == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "PeerMessage.fingerprint is not set on the ", Describe(from, message)));
  }
  if (shm_) {
    SHARD_RETURN_IF_ERROR(AbortStatus());
    ShmPair& pair = PairOf(from, to);
    if (!pair.error.ok()) return pair.error;
    return shm_endpoints_[from]->SendVia(*pair.sender, to, message, data);
  }
  // Copy outside the lock: the receiver may be busy with other messages.
  Letter letter{std::vector<uint8_t>(data.begin(), data.end()),
                message.fingerprint->hash, message.fingerprint->text};
  Mailbox& box = *mailboxes_[to];
  absl::MutexLock lock(&box.mu);
  if (!box.aborted.ok()) return box.aborted;
  const auto [it, inserted] = box.letters.emplace(
      LetterKey(from, message.seq, message.step), std::move(letter));
  if (!inserted) {
    return absl::InternalError(absl::StrCat(
        "device ", to, " already holds an unreceived ", Describe(from, message),
        " of collective '", it->second.fingerprint_text, "'"));
  }
  box.arrived.SignalAll();
  return absl::OkStatus();
}

absl::Status InMemoryHub::Recv(int64_t to, int64_t from,
                               const PeerMessage& message,
                               absl::Span<uint8_t> out) {
  if (from < 0 || from >= num_devices_ || to < 0 || to >= num_devices_) {
    return absl::InvalidArgumentError(
        absl::StrCat("device ", to, " receives from device ", from,
                     ": the mesh has devices 0 to ", num_devices_ - 1));
  }
  if (message.fingerprint == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("PeerMessage.fingerprint is not set for the ",
                     Describe(from, message), " to device ", to));
  }
  if (shm_) {
    SHARD_RETURN_IF_ERROR(AbortStatus());
    ShmPair& pair = PairOf(from, to);
    if (!pair.error.ok()) return pair.error;
    ++waiting_receivers_;
    absl::Status s = shm_endpoints_[to]->TakeVia(*pair.receiver, from, message,
                                                 out, nullptr);
    --waiting_receivers_;
    return s;
  }
  const Fingerprint& expected = *message.fingerprint;
  const absl::Time deadline = absl::Now() + recv_timeout_;
  Letter letter;
  {
    Mailbox& box = *mailboxes_[to];
    absl::MutexLock lock(&box.mu);
    const LetterKey key(from, message.seq, message.step);
    for (;;) {
      if (!box.aborted.ok()) return box.aborted;
      auto it = box.letters.find(key);
      if (it != box.letters.end()) {
        letter = std::move(it->second);
        box.letters.erase(it);
        break;
      }
      // Another message of this collective from the same sender with a
      // different fingerprint: the devices called different collectives,
      // whose message patterns may never line up. Fail now, as PeerInbox.
      for (const auto& [k, l] : box.letters) {
        if (std::get<0>(k) == from && std::get<1>(k) == message.seq &&
            l.fingerprint_hash != expected.hash) {
          return absl::InvalidArgumentError(absl::StrCat(
              "collective mismatch: device ", from, " sent '",
              l.fingerprint_text, "' but device ", to, " expects '",
              expected.text, "' (seq ", message.seq, ")"));
        }
      }
      if (absl::Now() >= deadline) {
        return absl::DeadlineExceededError(absl::StrCat(
            "device ", to, " waited ", absl::FormatDuration(recv_timeout_),
            " for the ", Describe(from, message), " of collective '",
            expected.text, "'; it never arrived"));
      }
      // Counted under box.mu, which Abort takes: an Abort that sees the
      // count finds this Recv waiting, and wakes it.
      ++waiting_receivers_;
      box.arrived.WaitWithDeadline(&box.mu, deadline);
      --waiting_receivers_;
    }
  }
  if (letter.fingerprint_hash != expected.hash) {
    return absl::InvalidArgumentError(absl::StrCat(
        "collective mismatch: device ", from, " sent '",
        letter.fingerprint_text, "' but device ", to, " expects '",
        expected.text, "' (seq ", message.seq, ", step ", message.step, ")"));
  }
  if (letter.payload.size() != out.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the ", Describe(from, message), " of collective '", expected.text,
        "' has ", letter.payload.size(), " bytes but device ", to, " expects ",
        out.size(), " bytes"));
  }
  if (!out.empty()) std::memcpy(out.data(), letter.payload.data(), out.size());
  return absl::OkStatus();
}

absl::Status InMemoryHub::Lend(int64_t from, int64_t to,
                               const PeerMessage& message,
                               absl::Span<const uint8_t> data) {
  if (!shm_ || from < 0 || from >= num_devices_ || to < 0 ||
      to >= num_devices_ || message.fingerprint == nullptr) {
    return Send(from, to, message, data);  // which reports bad arguments
  }
  SHARD_RETURN_IF_ERROR(AbortStatus());
  ShmPair& pair = PairOf(from, to);
  if (!pair.error.ok()) return pair.error;
  return shm_endpoints_[from]->LendVia(pair.sender, to, message, data);
}

absl::Status InMemoryHub::Settle(int64_t device, bool abandon) {
  if (!shm_ || device < 0 || device >= num_devices_) return absl::OkStatus();
  return shm_endpoints_[device]->Settle(abandon);
}

absl::Status InMemoryPeerTransport::Lend(int64_t to, const PeerMessage& message,
                                         absl::Span<const uint8_t> data) {
  return hub_->Lend(device_, to, message, data);
}

absl::Status InMemoryPeerTransport::Settle(bool abandon) {
  return hub_->Settle(device_, abandon);
}

absl::Status InMemoryPeerTransport::Send(int64_t to, const PeerMessage& message,
                                         absl::Span<const uint8_t> data) {
  return hub_->Send(device_, to, message, data);
}

absl::Status InMemoryPeerTransport::Recv(int64_t from,
                                         const PeerMessage& message,
                                         absl::Span<uint8_t> out) {
  return hub_->Recv(device_, from, message, out);
}

}  // namespace shardmap
