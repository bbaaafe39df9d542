// Bearer-token authentication of every RPC: the server side is a
// grpc::AuthMetadataProcessor (constant-time compare, failures logged
// without the token), the client side an interceptor that adds the token
// to every call's metadata, so it travels the same way over TLS and over
// plaintext (gRPC sends call credentials only over secure channels).
#ifndef SHARDMAP_CORE_TOKEN_AUTH_H_
#define SHARDMAP_CORE_TOKEN_AUTH_H_

#include <grpcpp/security/auth_metadata_processor.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/support/client_interceptor.h>

#include <memory>
#include <string>

#include "absl/strings/string_view.h"

namespace shardmap {

// The metadata key and value prefix: "authorization: Bearer <token>".
inline constexpr char kAuthMetadataKey[] = "authorization";
inline constexpr char kBearerPrefix[] = "Bearer ";

// True when `a` equals `b`; the time taken depends only on the length of
// `b` (the secret), not on where the strings differ.
bool ConstantTimeEquals(absl::string_view a, absl::string_view b);

// Accepts a call only if it carries "authorization: Bearer <token>".
// Health checks (grpc.health.v1.Health) pass without it, so orchestrators'
// probes work; they reveal only whether the server serves. `component`
// names the server in the warning logged for each rejected call.
class TokenAuthProcessor : public grpc::AuthMetadataProcessor {
 public:
  TokenAuthProcessor(std::string token, std::string component);
  bool IsBlocking() const override { return false; }
  grpc::Status Process(const InputMetadata& auth_metadata,
                       grpc::AuthContext* context,
                       OutputMetadata* consumed_auth_metadata,
                       OutputMetadata* response_metadata) override;

 private:
  const std::string token_;
  const std::string component_;
};

// Plaintext server credentials that, unlike grpc::InsecureServerCredentials
// (which aborts on SetAuthMetadataProcessor), run an AuthMetadataProcessor
// on every call. The processor gets no AuthContext (there is no peer
// identity without TLS).
std::shared_ptr<grpc::ServerCredentials> PlaintextServerCredentials();

// Adds "authorization: Bearer <token>" to every call of a channel.
class TokenInterceptorFactory
    : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit TokenInterceptorFactory(std::string token)
      : header_(kBearerPrefix + token) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo* info) override;

 private:
  const std::string header_;
};

}  // namespace shardmap

#endif  // SHARDMAP_CORE_TOKEN_AUTH_H_
