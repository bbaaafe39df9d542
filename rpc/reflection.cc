#include "rpc/reflection.h"

#include <dlfcn.h>
#include <grpcpp/grpcpp.h>

#include <string>

#include "absl/strings/str_cat.h"

namespace shardmap {

absl::Status EnableServerReflection() {
  // The runtime package ships the library under its versioned name only:
  // libgrpc++_reflection.so.<major>.<minor>.
  const std::string version = grpc::Version();
  const std::string major_minor = version.substr(0, version.rfind('.'));
  std::string error;
  for (const std::string& name :
       {absl::StrCat("libgrpc++_reflection.so.", major_minor),
        std::string("libgrpc++_reflection.so")}) {
    if (dlopen(name.c_str(), RTLD_NOW | RTLD_GLOBAL) != nullptr) {
      return absl::OkStatus();
    }
    absl::StrAppend(&error, error.empty() ? "" : "; ", dlerror());
  }
  return absl::UnavailableError(absl::StrCat(
      "--reflection: cannot load gRPC's reflection library: ", error));
}

}  // namespace shardmap
