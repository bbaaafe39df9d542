// shardctl health: one grpc.health.v1 Check (or a Watch) against any
// shardmap process, for docker-compose healthchecks and exec probes.
#include <grpcpp/grpcpp.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "client/commands.h"
#include "client/exit_codes.h"
#include "core/status_util.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "rpc/channel.h"
#include "rpc/grpc_status.h"

namespace shardmap {
namespace {

using HealthResponse = ::grpc::health::v1::HealthCheckResponse;

std::string StatusName(HealthResponse::ServingStatus s) {
  return HealthResponse::ServingStatus_Name(s);
}

// SERVING 0; NOT_SERVING, UNKNOWN: 75, the service is not ready (yet).
int ExitCodeForServing(HealthResponse::ServingStatus s) {
  return s == HealthResponse::SERVING ? kExitOk : kExitTempFail;
}

void Print(const HealthFlags& f, HealthResponse::ServingStatus s) {
  if (f.json) {
    std::cout << nlohmann::json{{"addr", f.addr},
                                {"service", f.service},
                                {"status", StatusName(s)},
                                {"exit_code", ExitCodeForServing(s)}}
                     .dump()
              << std::endl;
  } else {
    std::cout << StatusName(s) << std::endl;
  }
}

// Unreachable and timed out are both "unavailable" (69); an unknown
// service is a usage error (64).
int ReportRpcError(const HealthFlags& f, const grpc::Status& s) {
  absl::Status status = FromGrpcStatus(s);
  if (s.error_code() == grpc::StatusCode::NOT_FOUND) {
    return ReportError(absl::NotFoundError(absl::StrCat(
                           "no service named '", f.service, "' at ", f.addr)),
                       kExitUsage, f.json);
  }
  return ReportError(
      absl::Status(status.code(),
                   absl::StrCat("health of ", f.addr, ": ", status.message())),
      kExitUnavailable, f.json);
}

}  // namespace

int HealthCommand(const HealthFlags& f) {
  if (f.timeout_seconds <= 0) {
    return ReportError(
        absl::InvalidArgumentError(absl::StrCat(
            "--timeout must be positive, got ", f.timeout_seconds)),
        kExitUsage, f.json);
  }
  auto stub = ::grpc::health::v1::Health::NewStub(MakeChannel(f.addr));
  ::grpc::health::v1::HealthCheckRequest request;
  request.set_service(f.service);
  grpc::ClientContext context;
  context.set_deadline(
      absl::ToChronoTime(absl::Now() + absl::Seconds(f.timeout_seconds)));
  if (!f.watch) {
    HealthResponse response;
    grpc::Status s = stub->Check(&context, request, &response);
    if (!s.ok()) return ReportRpcError(f, s);
    Print(f, response.status());
    return ExitCodeForServing(response.status());
  }
  // One line per change until --timeout; the exit code is the last one's.
  auto reader = stub->Watch(&context, request);
  HealthResponse response;
  bool any = false;
  while (reader->Read(&response)) {
    any = true;
    Print(f, response.status());
  }
  grpc::Status s = reader->Finish();
  if (!any) return ReportRpcError(f, s);
  return ExitCodeForServing(response.status());
}

}  // namespace shardmap
