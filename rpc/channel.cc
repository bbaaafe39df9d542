#include "rpc/channel.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include "absl/strings/numbers.h"
#include "rpc/credentials.h"
#include "rpc/keepalive.h"
#include "rpc/token_auth.h"
#include "wire/chunking.h"

namespace shardmap {
namespace {

// The largest buffer one read of a connection takes (gRPC's default is
// 4 MiB). An idle connection keeps its last read's buffer, so this bounds
// what each connection holds once a burst is over; reads of large
// messages only take more system calls (one per 256 KiB): job_bench (a
// 256 MiB job) and collective_bench (psum of 64 MiB over gRPC), run
// interleaved against the 4 MiB default, showed no slowdown beyond the
// noise of a loaded machine. See ops/process_tuning.h.
constexpr int kMaxReadChunkBytes = 256 << 10;
// Threads a synchronous server keeps waiting for calls (see
// ConfigureServerBuilder).
constexpr int kMaxIdleServerThreads = 16;

}  // namespace

// Clients ping every 30 s when idle; servers allow pings every 10 s, so an
// idle cluster never gets a too_many_pings GOAWAY. Servers ping every 10 s
// and give 5 s for the answer.
const KeepalivePolicy& Keepalive() {
  static const KeepalivePolicy kPolicy = [] {
    KeepalivePolicy k;
    k.client_ping_ms = 30000;
    k.client_ping_timeout_ms = 10000;
    k.server_min_ping_ms = 10000;
    k.server_max_ping_strikes = 0;
    k.server_ping_ms = 10000;
    k.server_ping_timeout_ms = 5000;
    return k;
  }();
  return kPolicy;
}

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address) {
  return MakeChannel(address, DefaultChannelSecurity());
}

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address,
                                           const ChannelSecurity& security) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, Keepalive().client_ping_ms);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
              Keepalive().client_ping_timeout_ms);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // The retry layer holds sent messages until a call commits; shardmap
  // streams retry at the job level instead.
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
  // Bandwidth-delay probing resizes the flow-control window while a large
  // transfer runs and costs loopback streams about a quarter of their
  // throughput; the default window is as good without it.
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  args.SetInt(GRPC_ARG_TCP_MAX_READ_CHUNK_SIZE, kMaxReadChunkBytes);
  if (!security.server_name.empty()) {
    args.SetSslTargetNameOverride(security.server_name);
  }
  std::string token = security.token;
  if (token.empty() && security.discover_local_token) {
    token = ReadLocalToken(address);
  }
  std::vector<
      std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
      interceptors;
  if (!token.empty()) {
    interceptors.push_back(std::make_unique<TokenInterceptorFactory>(token));
  }
  return grpc::experimental::CreateCustomChannelWithInterceptors(
      address,
      security.credentials ? security.credentials
                           : grpc::InsecureChannelCredentials(),
      args, std::move(interceptors));
}

void ConfigureServerBuilder(grpc::ServerBuilder& builder) {
  // A synchronous server thread that finished a call goes back to waiting
  // for the next one only while fewer than MAX_POLLERS wait (gRPC's
  // default: 2); past that it exits, and the next call starts a thread.
  // Under concurrent jobs that was a thread created and destroyed per job
  // (with its thread-locals): a fifth of the coordinator's CPU per tiny
  // job, when its RunJob was synchronous (the workers' RunShard still is).
  // Each thread kept idle holds the stack pages it touched.
  builder.SetSyncServerOption(
      grpc::ServerBuilder::SyncServerOption::MAX_POLLERS,
      kMaxIdleServerThreads);
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  builder.AddChannelArgument(
      GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
      Keepalive().server_min_ping_ms);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES,
                             Keepalive().server_max_ping_strikes);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS,
                             Keepalive().server_ping_ms);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                             Keepalive().server_ping_timeout_ms);
  // Keep pinging a call that sends nothing for long (a long compute).
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  builder.AddChannelArgument(GRPC_ARG_TCP_MAX_READ_CHUNK_SIZE,
                             kMaxReadChunkBytes);
}

std::string ReplacePort(const std::string& listen, int port) {
  const size_t colon = listen.rfind(':');
  std::string host =
      colon == std::string::npos ? listen : listen.substr(0, colon);
  if (host.empty() || host == "0.0.0.0") host = "127.0.0.1";
  if (host == "[::]") host = "[::1]";
  return host + ":" + std::to_string(port);
}

std::string DialableAddress(const std::string& address) {
  const size_t colon = address.rfind(':');
  int port = 0;
  if (colon == std::string::npos ||
      !absl::SimpleAtoi(address.substr(colon + 1), &port)) {
    return address;
  }
  return ReplacePort(address, port);
}

}  // namespace shardmap
