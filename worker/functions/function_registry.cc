#include "worker/functions/function_registry.h"

#include <cstdlib>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace shardmap {

void MustRegister(FunctionRegistry& registry, const Signature& signature,
                  Kernel kernel) {
  if (absl::Status s = registry.Register(signature, std::move(kernel));
      !s.ok()) {
    std::cerr << "registering built-in functions: " << s << std::endl;
    std::abort();
  }
}

absl::Status FunctionRegistry::Register(const Signature& signature,
                                        Kernel kernel,
                                        const std::string& origin) {
  const std::string& name = signature.proto().name();
  if (auto it = functions_.find(name); it != functions_.end()) {
    return absl::AlreadyExistsError(absl::StrCat(
        "function '", name, "' (", origin, ") is already registered (",
        it->second.signature.origin(), ")"));
  }
  FunctionDef def{signature.proto(), std::move(kernel)};
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

std::vector<v1::FunctionSignature> FunctionRegistry::Signatures() const {
  std::vector<v1::FunctionSignature> out;
  for (const auto& [name, def] : functions_) out.push_back(def.signature);
  return out;
}

}  // namespace shardmap
