#include "server/function_catalog.h"

#include "absl/strings/str_cat.h"

namespace shardmap {

absl::StatusOr<v1::FunctionSignature> FunctionCatalog::Resolve(
    const v1::JobSpec& spec) const {
  if (!spec.program().empty()) {
    if (!spec.function().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("the job names both a function ('", spec.function(),
                       "') and a program: give one (--fn or --expr)"));
    }
    return ProgramStore::SignatureOf("", spec.program());
  }
  if (spec.function().empty()) {
    return absl::InvalidArgumentError(
        "the job names no function: give --fn NAME or --expr SOURCE");
  }
  absl::StatusOr<v1::FunctionSignature> native =
      pool_->FindFunction(spec.function());
  if (auto f = programs_->Find(spec.function()); f.has_value()) {
    if (native.ok()) {
      // Registered before a worker brought a function of that name: which
      // one is meant is not for the coordinator to guess.
      return absl::FailedPreconditionError(absl::StrCat(
          "'", spec.function(),
          "' names both a registered program and a function of the "
          "workers; unregister the program (shardctl unregister ",
          spec.function(), ") or register it under another name"));
    }
    return *f;
  }
  if (native.ok() || !absl::IsNotFound(native.status())) return native;
  std::vector<v1::FunctionSignature> programs = programs_->List();
  if (programs.empty()) return native;
  std::string names;
  for (const auto& p : programs) {
    absl::StrAppend(&names, names.empty() ? "" : ", ", p.name());
  }
  return absl::NotFoundError(absl::StrCat(native.status().message(),
                                          "; registered programs: ", names));
}

std::vector<v1::FunctionSignature> FunctionCatalog::List() const {
  std::vector<v1::FunctionSignature> all = pool_->Functions();
  for (v1::FunctionSignature& p : programs_->List()) {
    all.push_back(std::move(p));
  }
  return all;
}

absl::StatusOr<v1::FunctionSignature> FunctionCatalog::Register(
    const std::string& name, const std::string& source, bool replace) {
  if (pool_->Functions().empty()) {
    return absl::FailedPreconditionError(
        "no worker has registered yet, so the names of the workers' "
        "functions are not known; register the program once the cluster "
        "is up (shardctl status)");
  }
  if (pool_->FindFunction(name).ok()) {
    return absl::AlreadyExistsError(
        absl::StrCat("'", name,
                     "' is a built-in function of the workers; choose "
                     "another name for the program"));
  }
  return programs_->Register(name, source, replace);
}

absl::Status FunctionCatalog::Unregister(const std::string& name) {
  return programs_->Unregister(name);
}

}  // namespace shardmap
