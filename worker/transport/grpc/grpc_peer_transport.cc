#include "worker/transport/grpc/grpc_peer_transport.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "rpc/channel_cache.h"

namespace shardmap {
namespace {
// Data per frame: well under the 8 MiB message limit every channel sets.
constexpr size_t kFragmentBytes = 1 << 20;
// Replaced processes remembered per peer address.
constexpr size_t kReplacedKept = 8;
// How long Settle(abandon) lets lent buffers drain while their links make
// no progress before it drops them (it waits at most the collective
// timeout while they do), and how long gRPC may take to let go of them
// after that (a frozen peer's connection is closed by keepalive within
// rpc/channel.cc's ping interval and timeout).
constexpr absl::Duration kAbandonGrace = absl::Seconds(2);
constexpr absl::Duration kForcedRelease = absl::Seconds(90);

absl::Status ReceiveOutsideMesh(int64_t from, int64_t n) {
  return absl::InvalidArgumentError(
      absl::StrCat("receive from device ", from, " outside the mesh of ", n));
}
}  // namespace

PeerNetwork::~PeerNetwork() {
  absl::MutexLock lock(&mu_);
  for (auto& [address, peer] : peers_) {
    if (peer.link) peer.link->Shutdown();
  }
}

void PeerNetwork::set_my_address(const std::string& address) {
  absl::MutexLock lock(&mu_);
  options_.my_address = address;
}

std::string PeerNetwork::my_address() {
  absl::MutexLock lock(&mu_);
  return options_.my_address;
}

uint64_t PeerNetwork::incarnation() {
  absl::MutexLock lock(&mu_);
  return options_.incarnation;
}

absl::StatusOr<std::shared_ptr<PeerLink>> PeerNetwork::Link(
    const std::string& address, uint64_t incarnation) {
  absl::MutexLock lock(&mu_);
  Peer& peer = peers_[address];
  if (incarnation != 0 && incarnation != peer.incarnation) {
    if (std::find(peer.replaced.begin(), peer.replaced.end(), incarnation) !=
        peer.replaced.end()) {
      return absl::UnavailableError(
          absl::StrCat("the worker at ", address,
                       " restarted after this job was planned; its process ",
                       incarnation, " is gone"));
    }
    if (peer.incarnation != 0) {
      peer.replaced.push_back(peer.incarnation);
      if (peer.replaced.size() > kReplacedKept) peer.replaced.pop_front();
      // The channel was dialled to another process: dial the new one.
      channels_->Evict(address);
    }
    // The link (if any) is to another process: never reuse it.
    if (peer.link) peer.link->Shutdown();
    peer.link.reset();
    peer.incarnation = incarnation;
  }
  if (peer.link && peer.link->broken()) {
    // Dial afresh if the transport failed (see ChannelCache::OnCallEnded).
    channels_->OnCallEnded(address, peer.channel,
                           absl::UnavailableError(absl::StrCat(
                               "the link to ", address, " broke")));
    peer.link.reset();
  }
  if (!peer.link) {
    peer.channel = channels_->Get(address);
    peer.stub = std::make_unique<grpc::GenericStub>(peer.channel);
    peer.link = PeerLink::Open(peer.stub.get(), address, options_.my_address,
                               options_.incarnation);
  }
  return peer.link;
}

GrpcPeerTransport::GrpcPeerTransport(PeerNetwork* network, Options options)
    : network_(network), options_(std::move(options)) {}

GrpcPeerTransport::~GrpcPeerTransport() {
  network_->inbox()->ForgetJob(options_.job_id);
}

uint64_t GrpcPeerTransport::incarnation(int64_t d) const {
  return d >= 0 && d < static_cast<int64_t>(options_.incarnations.size())
             ? options_.incarnations[d]
             : 0;
}

void PeerNetwork::Drop(const std::string& address, const PeerLink* only) {
  absl::MutexLock lock(&mu_);
  auto it = peers_.find(address);
  if (it == peers_.end()) return;
  Peer& peer = it->second;
  if (only != nullptr && peer.link.get() != only) return;
  if (peer.link) peer.link->Shutdown();
  channels_->Evict(address);
  peer.link.reset();
  peer.stub.reset();
  peer.channel.reset();
}

absl::Status GrpcPeerTransport::Send(int64_t to, const PeerMessage& message,
                                     absl::Span<const uint8_t> data) {
  return Post(to, message, data, /*lend=*/false);
}

absl::Status GrpcPeerTransport::Lend(int64_t to, const PeerMessage& message,
                                     absl::Span<const uint8_t> data) {
  return Post(to, message, data, /*lend=*/true);
}

absl::Status GrpcPeerTransport::Settle(bool abandon) {
  const auto never = [] { return absl::OkStatus(); };
  LentLinks lent_to;
  {
    absl::MutexLock lock(&mu_);
    lent_to.swap(lent_to_);
  }
  if (lent_.outstanding() == 0) return absl::OkStatus();
  const absl::Status s =
      abandon ? AwaitReleasedWhileRead(lent_to)
              : lent_.AwaitReleased(
                    std::min(options_.deadline,
                             absl::Now() + options_.collective_timeout),
                    options_.aborted);
  if (s.ok()) return s;
  const int64_t held = lent_.outstanding();
  // The caller is about to reuse or free the buffers: take them back from
  // gRPC by tearing down the links they were queued on.
  std::vector<std::string> addresses;
  for (const auto& [address, weak] : lent_to) {
    DropLink(address, weak);
    addresses.push_back(address);
  }
  if (!lent_.AwaitReleased(absl::Now() + kForcedRelease, never).ok()) {
    // Returning would let the caller free memory gRPC still reads.
    spdlog::critical(
        "gRPC still holds {} buffers lent to it {} after their links to {} "
        "were closed; stopping rather than let it read freed memory",
        lent_.outstanding(), absl::FormatDuration(kForcedRelease),
        absl::StrJoin(addresses, ", "));
    std::abort();
  }
  if (abandon) return absl::OkStatus();
  return absl::Status(s.code(),
                      absl::StrCat(s.message(), " (", held,
                                   " lent pieces were still queued to ",
                                   absl::StrJoin(addresses, ", "),
                                   "; those links were closed)"));
}

void GrpcPeerTransport::DropLink(const std::string& address,
                                 const std::weak_ptr<PeerLink>& weak) {
  std::shared_ptr<PeerLink> link = weak.lock();
  if (link == nullptr) return;  // its call is over, the buffers back
  // The address's connection too, if the link is still its current one (a
  // newer link, to a restarted peer say, carries other jobs and holds none
  // of these buffers); a link that broke may still wait for its call to
  // end: cancelling it ends it.
  network_->Drop(address, link.get());
  link->Shutdown();
}

absl::Status GrpcPeerTransport::AwaitReleasedWhileRead(
    const LentLinks& lent_to) {
  // A live peer reads everything it is sent, even for a job it gave up on,
  // so lent buffers come back once the links have carried what was queued
  // before them (other jobs' bytes too). Dropping a link fails every job
  // that shares it, so links are waited for while they make progress (up
  // to the collective timeout). A link with frames waiting that completes
  // no write for kAbandonGrace is not being read (its peer is stopped or
  // gone): it is dropped then, since waiting on would hold this worker's
  // later jobs up. If no link moves at all, the buffers are stuck where no
  // queue shows them (gRPC's flow control), and every link is dropped.
  const auto never = [] { return absl::OkStatus(); };
  const absl::Time give_up =
      absl::Now() + std::max(kAbandonGrace, options_.collective_timeout);
  std::map<std::string, uint64_t> seen;
  for (const auto& [address, weak] : lent_to) {
    if (std::shared_ptr<PeerLink> link = weak.lock()) {
      seen[address] = link->writes_done();
    }
  }
  for (;;) {
    absl::Status s = lent_.AwaitReleased(
        std::min(give_up, absl::Now() + kAbandonGrace), never);
    if (s.ok() || absl::Now() >= give_up) return s;
    std::vector<std::string> stuck;
    bool moved = false;
    for (const auto& [address, weak] : lent_to) {
      std::shared_ptr<PeerLink> link = weak.lock();
      if (link == nullptr || link->broken()) continue;
      const uint64_t done = link->writes_done();
      if (done != seen[address]) {
        moved = true;
      } else if (link->pending()) {
        stuck.push_back(address);
      }
      seen[address] = done;
    }
    if (!moved) return s;  // Settle drops them all
    for (const std::string& address : stuck) {
      DropLink(address, lent_to.at(address));
    }
  }
}

absl::Status GrpcPeerTransport::Post(int64_t to, const PeerMessage& message,
                                     absl::Span<const uint8_t> data,
                                     bool lend) {
  if (to < 0 || to >= num_devices()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "send to device ", to, " outside the mesh of ", num_devices()));
  }
  const std::string& address = options_.addresses[to];
  // Messages to this device skip the network and go straight to the inbox.
  std::shared_ptr<PeerLink> link;
  if (to != options_.device) {
    absl::StatusOr<std::shared_ptr<PeerLink>> l =
        network_->Link(address, incarnation(to));
    if (!l.ok()) {
      return absl::UnavailableError(
          absl::StrCat("cannot send to device ", to, " in ",
                       message.fingerprint->text, ": ", l.status().message()));
    }
    link = *std::move(l);
    if (lend) {
      absl::MutexLock lock(&mu_);
      lent_to_[address] = link;
    }
  }
  size_t offset = 0;
  do {
    const size_t n = std::min(kFragmentBytes, data.size() - offset);
    v1::PeerFrame frame;
    frame.set_job_id(options_.job_id);
    frame.set_from_device(options_.device);
    frame.set_seq(message.seq);
    frame.set_step(message.step);
    frame.set_fingerprint(message.fingerprint->hash);
    if (offset == 0) frame.set_fingerprint_text(message.fingerprint->text);
    frame.set_total_bytes(data.size());
    frame.set_offset(offset);
    const absl::Span<const uint8_t> piece = data.subspan(offset, n);
    absl::Status s;
    if (link) {
      grpc::Slice payload;
      if (n > 0) {
        payload =
            lend ? lent_.Lend(piece) : grpc::Slice(piece.data(), piece.size());
      }
      s = link->Send(frame, std::move(payload), options_.deadline,
                     options_.aborted);
    } else {
      std::vector<grpc::Slice> copy;
      if (n > 0) copy.emplace_back(piece.data(), n);
      s = network_->inbox()->Deliver(
          DecodedFrame{std::move(frame), PeerPayload(std::move(copy))});
    }
    if (!s.ok()) {
      if (s.code() == absl::StatusCode::kUnavailable) {
        return absl::UnavailableError(absl::StrCat(
            "cannot send to device ", to, " (worker ", address, ") in ",
            message.fingerprint->text, ": ", s.message()));
      }
      return s;
    }
    offset += n;
  } while (offset < data.size());
  return absl::OkStatus();
}

absl::Status GrpcPeerTransport::Recv(int64_t from, const PeerMessage& message,
                                     absl::Span<uint8_t> out) {
  if (from < 0 || from >= num_devices()) {
    return ReceiveOutsideMesh(from, num_devices());
  }
  const absl::Time deadline =
      std::min(options_.deadline, absl::Now() + options_.collective_timeout);
  return network_->inbox()->Take(WantOf(from, message), out, deadline,
                                 options_.aborted);
}

absl::Status GrpcPeerTransport::RecvChunks(int64_t from,
                                           const PeerMessage& message,
                                           size_t size,
                                           const ChunkConsumer& consume) {
  if (from < 0 || from >= num_devices()) {
    return ReceiveOutsideMesh(from, num_devices());
  }
  const absl::Time deadline =
      std::min(options_.deadline, absl::Now() + options_.collective_timeout);
  return network_->inbox()->TakeChunks(WantOf(from, message), size, consume,
                                       deadline, options_.aborted);
}

PeerInbox::Want GrpcPeerTransport::WantOf(int64_t from,
                                          const PeerMessage& message) const {
  PeerInbox::Want want;
  want.job_id = options_.job_id;
  want.from_device = from;
  want.from_address = options_.addresses[from];
  want.from_incarnation = incarnation(from);
  want.seq = message.seq;
  want.step = message.step;
  want.fingerprint = message.fingerprint;
  return want;
}

}  // namespace shardmap
