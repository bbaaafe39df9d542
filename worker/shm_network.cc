#include "worker/shm_network.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "rpc/channel_cache.h"
#include "rpc/grpc_status.h"

namespace shardmap {
namespace {

constexpr absl::Duration kAttachTimeout = absl::Seconds(2);
constexpr uint64_t kMaxRingBytes = uint64_t{1} << 30;

}  // namespace

ShmNetwork::ShmNetwork(Options options, ChannelCache* channels)
    : channels_(channels),
      identity_(options.host_identity.empty() ? LocalHostIdentity()
                                              : options.host_identity),
      enabled_(options.enabled),
      memory_(options.memory != nullptr ? options.memory
                                        : ProcessVmReader::Get()),
      options_(std::move(options)) {}

ShmNetwork::~ShmNetwork() = default;

std::string ShmNetwork::LocalHostIdentity() {
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string boot_id;
  if (!std::getline(boot, boot_id) || boot_id.empty()) return "";
  struct stat shm, ipc;
  if (stat("/dev/shm", &shm) != 0 || stat("/proc/self/ns/ipc", &ipc) != 0) {
    return "";
  }
  return absl::StrCat("boot=", absl::StripAsciiWhitespace(boot_id),
                      ";shm=", shm.st_dev, ":", shm.st_ino, ";ipc=", ipc.st_ino,
                      ";uid=", geteuid());
}

void ShmNetwork::set_my_address(const std::string& address) {
  absl::MutexLock lock(&mu_);
  options_.my_address = address;
}

std::shared_ptr<ShmSender> ShmNetwork::SenderTo(const std::string& address,
                                                absl::Time deadline,
                                                uint64_t incarnation) {
  std::shared_ptr<absl::Mutex> asking;
  auto known = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Outgoing& o = out_[address];
    if (o.sender != nullptr && !o.sender->Usable()) {
      spdlog::debug("shm: the channel to {} is closed; asking again", address);
      o.sender.reset();
    }
    if (incarnation != 0 && o.incarnation != 0 &&
        o.incarnation != incarnation && (o.sender != nullptr || o.use_grpc)) {
      spdlog::debug("shm: {} is another process now; asking again", address);
      o.sender.reset();
      o.use_grpc = false;
    }
    if (!o.asking) o.asking = std::make_shared<absl::Mutex>();
    asking = o.asking;
    return o.sender != nullptr || o.use_grpc || absl::Now() < o.retry_after;
  };
  {
    absl::MutexLock lock(&mu_);
    if (known()) return out_[address].sender;
  }
  absl::MutexLock ask_lock(asking.get());
  {
    absl::MutexLock lock(&mu_);  // someone else may have asked meanwhile
    if (known()) return out_[address].sender;
  }
  bool keep = false;
  uint64_t answered = 0;
  bool back_off = false;
  std::shared_ptr<ShmSender> sender =
      Ask(address, deadline, &keep, &answered, &back_off);
  absl::MutexLock lock(&mu_);
  Outgoing& o = out_[address];
  o.sender = sender;
  o.use_grpc = keep && sender == nullptr;
  o.incarnation = answered;
  o.retry_after = back_off ? absl::Now() + options_.attach_retry_after
                           : absl::InfinitePast();
  return sender;
}

std::shared_ptr<ShmSender> ShmNetwork::Ask(const std::string& address,
                                           absl::Time deadline, bool* keep,
                                           uint64_t* incarnation,
                                           bool* back_off) {
  *back_off = false;
  v1::ShmAttachRequest request;
  size_t ring_bytes;
  bool enabled;
  bool single_copy;
  {
    absl::MutexLock lock(&mu_);
    request.set_from_address(options_.my_address);
    request.set_incarnation(options_.incarnation);
    ring_bytes = options_.ring_bytes;
    enabled = options_.enabled;
    single_copy = options_.single_copy;
  }
  request.set_host_identity(identity_);
  std::unique_ptr<ShmRing> ring;
  if (enabled && !identity_.empty()) {
    absl::StatusOr<std::unique_ptr<ShmRing>> created =
        ShmRing::Create(ring_bytes);
    if (created.ok()) {
      ring = *std::move(created);
      request.set_segment(ring->name());
      request.set_nonce(ring->nonce());
      request.set_capacity(ring->capacity());
      if (single_copy) {
        request.set_pid(static_cast<uint32_t>(getpid()));
        request.set_probe_address(
            reinterpret_cast<uint64_t>(ring->nonce_address()));
      }
    } else {
      spdlog::warn(
          "shm: cannot create a ring for {}, which stays on gRPC: {} (a "
          "container needs a larger /dev/shm: shm_size in compose)",
          address, std::string(created.status().message()));
    }
  }
  grpc::ClientContext context;
  // Only a call that had its whole time speaks for the peer.
  const bool whole_time = deadline >= absl::Now() + kAttachTimeout;
  context.set_deadline(
      absl::ToChronoTime(std::min(deadline, absl::Now() + kAttachTimeout)));
  v1::ShmAttachResponse response;
  std::shared_ptr<grpc::Channel> channel;
  const grpc::Status status = channels_->Stub<v1::ShmPeer>(address, &channel)
                                  ->Attach(&context, request, &response);
  channels_->OnCallEnded(address, channel, FromGrpcStatus(status));
  if (ring != nullptr) ring->Unlink();  // mapped by now, or never will be
  if (!status.ok()) {
    // An older worker without ShmPeer stays on gRPC; anything else (the
    // peer unreachable or silent) is asked again after a while, or at once
    // if the caller's own deadline cut the call short.
    *keep = status.error_code() == grpc::StatusCode::UNIMPLEMENTED;
    *back_off =
        !*keep && (whole_time ||
                   status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED);
    spdlog::debug("shm: Attach to {} failed: {}", address,
                  status.error_message());
    return nullptr;
  }
  *keep = true;
  *incarnation = response.incarnation();
  if (ring == nullptr) return nullptr;
  if (!response.attached()) {
    spdlog::debug("shm: {} stays on gRPC: {}", address, response.reason());
    return nullptr;
  }
  spdlog::debug("shm: sending to {} through shared memory{}", address,
                response.single_copy() ? " (single copy)" : "");
  ShmSender::Options sender_options;
  sender_options.peer = absl::StrCat("worker ", address);
  sender_options.lend = response.single_copy();
  return std::make_shared<ShmSender>(std::move(ring), sender_options);
}

std::shared_ptr<ShmReceiver> ShmNetwork::ReceiverFrom(
    const std::string& address, uint64_t incarnation) {
  absl::MutexLock lock(&mu_);
  auto it = in_.find(address);
  if (it == in_.end()) return nullptr;
  // A channel from an earlier process at the address is not this one's.
  if (incarnation != 0 && it->second.incarnation != incarnation) return nullptr;
  return it->second.receiver;
}

v1::ShmAttachResponse ShmNetwork::Attach(const v1::ShmAttachRequest& request) {
  v1::ShmAttachResponse response;
  {
    absl::MutexLock lock(&mu_);
    response.set_incarnation(options_.incarnation);
  }
  auto refuse = [&](const std::string& reason) {
    response.set_attached(false);
    response.set_reason(reason);
    return response;
  };
  const std::string& from = request.from_address();
  if (request.segment().empty()) {
    absl::MutexLock lock(&mu_);
    in_.erase(from);  // the sender is on gRPC now
    return refuse("the sender offered no shared memory");
  }
  if (!enabled()) return refuse("shared memory is off here (--no-shm)");
  if (identity_.empty() || request.host_identity() != identity_) {
    return refuse(absl::StrCat("another host: '", request.host_identity(),
                               "' is not '", identity_, "'"));
  }
  if (request.capacity() == 0 || request.capacity() > kMaxRingBytes) {
    return refuse(absl::StrCat("ring capacity ", request.capacity(),
                               " is outside (0, ", kMaxRingBytes, "]"));
  }
  absl::StatusOr<std::unique_ptr<ShmRing>> ring =
      ShmRing::Attach(request.segment(), request.nonce(), request.capacity());
  if (!ring.ok()) {
    spdlog::debug("shm: cannot map {} from {}: {}", request.segment(), from,
                  ring.status().ToString());
    return refuse(std::string(ring.status().message()));
  }
  (*ring)->Unlink();
  const pid_t pid = SingleCopyFrom(request);
  auto receiver = std::make_shared<ShmReceiver>(
      *std::move(ring), absl::StrCat("worker ", from), memory_, pid);
  response.set_single_copy(pid > 0);
  spdlog::debug("shm: receiving from {} through shared memory", from);
  absl::MutexLock lock(&mu_);
  in_[from] = Incoming{std::move(receiver), request.incarnation()};
  response.set_attached(true);
  return response;
}

pid_t ShmNetwork::SingleCopyFrom(const v1::ShmAttachRequest& request) {
  {
    absl::MutexLock lock(&mu_);
    if (!options_.single_copy) return 0;
  }
  if (request.pid() == 0) return 0;  // the sender does not lend
  const pid_t pid = static_cast<pid_t>(request.pid());
  const absl::Status s =
      ProbeSingleCopy(*memory_, pid, request.probe_address(), request.nonce());
  if (s.ok()) return pid;
  static std::atomic<bool> said{false};
  if (!said.exchange(true)) {
    spdlog::info(
        "shm: single-copy transfers are not possible here ({}); large "
        "messages between co-located workers go through the shared-memory "
        "ring (two copies). They need the same user, the same pid "
        "namespace and kernel.yama.ptrace_scope <= 1",
        s.ToString());
  }
  spdlog::debug("shm: no single copy from {}: {}", request.from_address(),
                s.ToString());
  return 0;
}

void ShmNetwork::ForgetJob(const std::string& job_id) {
  std::vector<std::shared_ptr<ShmReceiver>> receivers;
  {
    absl::MutexLock lock(&mu_);
    // Channels whose other end is gone, and that hold nothing more, are
    // dropped here, so workers that come and go leave no mappings behind.
    for (auto it = in_.begin(); it != in_.end();) {
      const std::shared_ptr<ShmReceiver>& r = it->second.receiver;
      if (!r->SenderAlive() && r->Pending() == 0) {
        spdlog::debug("shm: {} is gone; unmapping its channel", it->first);
        it = in_.erase(it);
      } else {
        receivers.push_back(r);
        ++it;
      }
    }
    for (auto& [address, o] : out_) {
      if (o.sender != nullptr && !o.sender->Usable()) o.sender.reset();
    }
  }
  for (const auto& receiver : receivers) receiver->ForgetJob(job_id);
}

grpc::ServerUnaryReactor* ShmPeerService::Attach(
    grpc::CallbackServerContext* context, const v1::ShmAttachRequest* request,
    v1::ShmAttachResponse* response) {
  *response = network_->Attach(*request);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace shardmap
