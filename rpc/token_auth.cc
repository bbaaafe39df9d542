#include "rpc/token_auth.h"

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpcpp/support/interceptor.h>
#include <spdlog/spdlog.h>

#include "absl/strings/match.h"

namespace shardmap {
namespace {

constexpr absl::string_view kHealthPrefix = "/grpc.health.v1.Health/";

absl::string_view Find(
    const grpc::AuthMetadataProcessor::InputMetadata& metadata,
    absl::string_view key) {
  auto it = metadata.find(grpc::string_ref(key.data(), key.size()));
  if (it == metadata.end()) return {};
  return absl::string_view(it->second.data(), it->second.size());
}

// The state behind a plaintext port's core auth processor: it calls the
// C++ processor directly (TokenAuthProcessor never blocks).
struct ProcessorState {
  std::shared_ptr<grpc::AuthMetadataProcessor> processor;

  static void Process(void* state, grpc_auth_context* /*context*/,
                      const grpc_metadata* md, size_t num_md,
                      grpc_process_auth_metadata_done_cb cb, void* user_data) {
    auto* self = static_cast<ProcessorState*>(state);
    grpc::AuthMetadataProcessor::InputMetadata input;
    for (size_t i = 0; i < num_md; ++i) {
      input.emplace(
          grpc::string_ref(
              reinterpret_cast<const char*>(GRPC_SLICE_START_PTR(md[i].key)),
              GRPC_SLICE_LENGTH(md[i].key)),
          grpc::string_ref(
              reinterpret_cast<const char*>(GRPC_SLICE_START_PTR(md[i].value)),
              GRPC_SLICE_LENGTH(md[i].value)));
    }
    grpc::AuthMetadataProcessor::OutputMetadata consumed, response;
    const grpc::Status status =
        self->processor->Process(input, nullptr, &consumed, &response);
    // Consumed metadata stays visible to handlers; nothing reads it.
    cb(user_data, nullptr, 0, nullptr, 0,
       static_cast<grpc_status_code>(status.error_code()),
       status.error_message().c_str());
  }
  static void Destroy(void* state) {
    delete static_cast<ProcessorState*>(state);
  }
};

class PlaintextCredentialsImpl final : public grpc::ServerCredentials {
 public:
  PlaintextCredentialsImpl()
      : creds_(grpc_insecure_server_credentials_create()) {}
  ~PlaintextCredentialsImpl() override {
    grpc_server_credentials_release(creds_);
  }
  void SetAuthMetadataProcessor(
      const std::shared_ptr<grpc::AuthMetadataProcessor>& processor) override {
    grpc_server_credentials_set_auth_metadata_processor(
        creds_, {&ProcessorState::Process, &ProcessorState::Destroy,
                 new ProcessorState{processor}});
  }

 private:
  int AddPortToServer(const std::string& addr, grpc_server* server) override {
    return grpc_server_add_http2_port(server, addr.c_str(), creds_);
  }
  grpc_server_credentials* const creds_;
};

class TokenInterceptor : public grpc::experimental::Interceptor {
 public:
  explicit TokenInterceptor(const std::string* header) : header_(header) {}
  void Intercept(
      grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::
                PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->emplace(kAuthMetadataKey, *header_);
    }
    methods->Proceed();
  }

 private:
  const std::string* header_;
};

}  // namespace

bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < b.size(); ++i) {
    const unsigned char x = i < a.size() ? a[i] : 0;
    diff |= x ^ static_cast<unsigned char>(b[i]);
  }
  return diff == 0;
}

TokenAuthProcessor::TokenAuthProcessor(std::string token, std::string component)
    : token_(std::move(token)), component_(std::move(component)) {}

grpc::Status TokenAuthProcessor::Process(
    const InputMetadata& auth_metadata, grpc::AuthContext* /*context*/,
    OutputMetadata* consumed_auth_metadata,
    OutputMetadata* /*response_metadata*/) {
  const absl::string_view path = Find(auth_metadata, ":path");
  if (absl::StartsWith(path, kHealthPrefix)) return grpc::Status::OK;
  const absl::string_view header = Find(auth_metadata, kAuthMetadataKey);
  const char* problem = nullptr;
  if (header.empty()) {
    problem = "no bearer token";
  } else if (!absl::StartsWith(header, kBearerPrefix) ||
             !ConstantTimeEquals(header.substr(sizeof(kBearerPrefix) - 1),
                                 token_)) {
    problem = "a wrong bearer token";
  }
  if (problem == nullptr) {
    consumed_auth_metadata->emplace(kAuthMetadataKey, std::string(header));
    return grpc::Status::OK;
  }
  spdlog::warn("{}: refused {} (authority {}): {}", component_,
               std::string(path),
               std::string(Find(auth_metadata, ":authority")), problem);
  return grpc::Status(
      grpc::StatusCode::UNAUTHENTICATED,
      std::string(problem) + ": this " + component_ +
          " needs its token (--token-file FILE or SHARDMAP_TOKEN)");
}

std::shared_ptr<grpc::ServerCredentials> PlaintextServerCredentials() {
  return std::make_shared<PlaintextCredentialsImpl>();
}

grpc::experimental::Interceptor*
TokenInterceptorFactory::CreateClientInterceptor(
    grpc::experimental::ClientRpcInfo* /*info*/) {
  return new TokenInterceptor(&header_);
}

}  // namespace shardmap
