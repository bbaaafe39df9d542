// The gRPC settings every shardmap channel and server shares: message size
// limits set deliberately (one chunk plus headroom), keepalive that detects
// dead peers without tripping the server's ping policing.
#ifndef SHARDMAP_CORE_CHANNEL_H_
#define SHARDMAP_CORE_CHANNEL_H_

#include <grpcpp/channel.h>
#include <grpcpp/server_builder.h>

#include <memory>
#include <string>

namespace shardmap {

struct ChannelSecurity;  // rpc/credentials.h

// A channel to `address` (HOST:PORT) with shardmap's limits and the
// process's default security (TLS and token, rpc/credentials.h).
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address);
// The same with the given security.
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address,
                                           const ChannelSecurity& security);

// Applies the same limits and keepalive policy to a server, and keeps up
// to 16 idle threads of a synchronous server waiting for calls.
void ConfigureServerBuilder(grpc::ServerBuilder& builder);

// "127.0.0.1:0" + 4242 -> "127.0.0.1:4242"; "[::1]:0" -> "[::1]:4242".
// A listen address on every interface gives its loopback form:
// "0.0.0.0:0" + 4242 -> "127.0.0.1:4242", "[::]:0" -> "[::1]:4242".
std::string ReplacePort(const std::string& listen, int port);

// The address to dial for a server that listens on `address`: the same,
// except that 0.0.0.0, [::] and an empty host become loopback.
std::string DialableAddress(const std::string& address);

}  // namespace shardmap

#endif  // SHARDMAP_CORE_CHANNEL_H_
