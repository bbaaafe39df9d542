#include "worker/functions/function_registry.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status_util.h"
#include "worker/functions/sdk_function.h"

namespace shardmap {

absl::Status FunctionRegistry::Register(sdk::Function fn,
                                        const std::string& origin, bool local) {
  SHARD_ASSIGN_OR_RETURN(Signature sig, SignatureOf(fn));
  return Add(sig, KernelOf(std::move(fn)), origin, local);
}

absl::Status FunctionRegistry::Add(const Signature& signature, Kernel kernel,
                                   const std::string& origin, bool local) {
  const std::string& name = signature.proto().name();
  if (auto it = functions_.find(name); it != functions_.end()) {
    return absl::AlreadyExistsError(absl::StrCat(
        "function '", name, "' (", origin, ") is already registered (",
        it->second.signature.origin(), ")"));
  }
  FunctionDef def{signature.proto(), std::move(kernel), local};
  def.signature.set_origin(origin);
  functions_[name] = std::move(def);
  return absl::OkStatus();
}

absl::StatusOr<const FunctionDef*> FunctionRegistry::Find(
    const std::string& name) const {
  auto it = functions_.find(name);
  if (it == functions_.end()) {
    std::vector<std::string> names;
    for (const auto& [n, def] : functions_) names.push_back(n);
    return absl::NotFoundError(
        absl::StrCat("unknown function '", name,
                     "'; known functions: ", absl::StrJoin(names, ", ")));
  }
  return &it->second;
}

const FunctionDef* FunctionRegistry::FindOrNull(const std::string& name) const {
  auto it = functions_.find(name);
  return it == functions_.end() ? nullptr : &it->second;
}

std::vector<v1::FunctionSignature> FunctionRegistry::Signatures() const {
  std::vector<v1::FunctionSignature> out;
  for (const auto& [name, def] : functions_) out.push_back(def.signature);
  return out;
}

}  // namespace shardmap
