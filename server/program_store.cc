#include "server/program_store.h"

#include <spdlog/spdlog.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "core/atomic_file.h"
#include "core/bounded_json.h"
#include "core/status_util.h"
#include "program/checker.h"

namespace shardmap {
namespace {

constexpr int kFormat = 1;
constexpr size_t kMaxNameLength = 128;
constexpr uint64_t kMaxFileBytes = uint64_t{64} << 20;
constexpr size_t kMaxPrograms = 1000;

// Names as Python identifiers with dots and dashes: what a user types
// after --fn, and nothing a shell or a file name could misread.
absl::Status ValidateProgramName(const std::string& name) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("program name '", absl::CHexEscape(name), "' ", why,
                     ": use letters, digits, '_', '.' and '-', starting "
                     "with a letter or '_', at most ",
                     kMaxNameLength, " characters"));
  };
  if (name.empty()) return bad("is empty");
  if (name.size() > kMaxNameLength) return bad("is too long");
  if (!absl::ascii_isalpha(name[0]) && name[0] != '_') {
    return bad("does not start with a letter or '_'");
  }
  for (char c : name) {
    if (!absl::ascii_isalnum(c) && c != '_' && c != '.' && c != '-') {
      return bad("has a character outside the allowed set");
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<v1::FunctionSignature> ProgramStore::SignatureOf(
    const std::string& name, const std::string& source) {
  SHARD_ASSIGN_OR_RETURN(program::Signature parsed,
                         program::ParseSignature(source));
  v1::FunctionSignature f;
  f.set_name(name.empty() ? parsed.name : name);
  f.set_arity(static_cast<int32_t>(parsed.params.size()));
  f.set_num_outputs(parsed.num_outputs);
  std::string params;
  for (const std::string& p : parsed.params) {
    absl::StrAppend(&params, params.empty() ? "" : ", ", p);
  }
  f.set_doc(absl::StrCat("expression program (", params, ")"));
  f.set_program(source);
  return f;
}

absl::StatusOr<std::unique_ptr<ProgramStore>> ProgramStore::Open(
    const std::string& data_dir) {
  const std::string path =
      data_dir.empty() ? "" : absl::StrCat(data_dir, "/programs.json");
  std::unique_ptr<ProgramStore> store(new ProgramStore(path));
  if (path.empty()) return store;
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return store;  // nothing registered yet
  if (static_cast<uint64_t>(in.tellg()) > kMaxFileBytes) {
    return absl::DataLossError(
        absl::StrCat(path, " is larger than ", kMaxFileBytes, " bytes"));
  }
  in.seekg(0);
  std::stringstream text;
  text << in.rdbuf();
  auto bad = [&](const absl::Status& s) {
    return absl::DataLossError(absl::StrCat(path, ": ", s.message()));
  };
  absl::StatusOr<nlohmann::json> doc = ParseBoundedJson(text.str(), 8);
  if (!doc.ok()) return bad(doc.status());
  if (!doc->is_object() || doc->value("format", 0) != kFormat ||
      !doc->contains("programs") || !(*doc)["programs"].is_object()) {
    return bad(absl::InvalidArgumentError(absl::StrCat(
        "expected {\"format\": ", kFormat, ", \"programs\": {name: source}}")));
  }
  absl::MutexLock lock(&store->mu_);
  for (const auto& [name, source] : (*doc)["programs"].items()) {
    if (!source.is_string()) {
      return bad(absl::InvalidArgumentError(
          absl::StrCat("program '", name, "' is not a string")));
    }
    if (absl::Status s = ValidateProgramName(name); !s.ok()) return bad(s);
    absl::StatusOr<v1::FunctionSignature> f =
        SignatureOf(name, source.get<std::string>());
    if (!f.ok()) {
      return bad(Annotate(f.status(), absl::StrCat("program '", name, "'")));
    }
    store->sources_[name] = source.get<std::string>();
    store->signatures_[name] = *std::move(f);
  }
  spdlog::info("{} registered program(s) from {}", store->sources_.size(),
               path);
  return store;
}

absl::Status ProgramStore::Save(
    const std::map<std::string, std::string>& programs) const {
  if (path_.empty()) return absl::OkStatus();
  nlohmann::json doc = {{"format", kFormat},
                        {"programs", nlohmann::json::object()}};
  for (const auto& [name, source] : programs) doc["programs"][name] = source;
  const std::string text = doc.dump(2) + "\n";
  return WriteFileAtomically(path_, {text}, FileMode{0600, true});
}

absl::StatusOr<v1::FunctionSignature> ProgramStore::Register(
    const std::string& name, const std::string& source, bool replace) {
  SHARD_RETURN_IF_ERROR(ValidateProgramName(name));
  SHARD_ASSIGN_OR_RETURN(v1::FunctionSignature f, SignatureOf(name, source));
  absl::MutexLock lock(&mu_);
  if (sources_.count(name) == 0 && sources_.size() >= kMaxPrograms) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the coordinator keeps at most ", kMaxPrograms,
                     " programs; unregister one first"));
  }
  if (!replace && sources_.count(name) > 0) {
    return absl::AlreadyExistsError(
        absl::StrCat("a program named '", name,
                     "' is registered; unregister it first or replace it "
                     "(--replace)"));
  }
  std::map<std::string, std::string> next = sources_;
  next[name] = source;
  SHARD_RETURN_IF_ERROR(Save(next));
  sources_ = std::move(next);
  signatures_[name] = f;
  return f;
}

absl::Status ProgramStore::Unregister(const std::string& name) {
  absl::MutexLock lock(&mu_);
  if (sources_.count(name) == 0) {
    return absl::NotFoundError(
        absl::StrCat("no program named '", name, "' is registered"));
  }
  std::map<std::string, std::string> next = sources_;
  next.erase(name);
  SHARD_RETURN_IF_ERROR(Save(next));
  sources_ = std::move(next);
  signatures_.erase(name);
  return absl::OkStatus();
}

std::optional<v1::FunctionSignature> ProgramStore::Find(
    const std::string& name) const {
  absl::MutexLock lock(&mu_);
  auto it = signatures_.find(name);
  if (it == signatures_.end()) return std::nullopt;
  return it->second;
}

std::vector<v1::FunctionSignature> ProgramStore::List() const {
  absl::MutexLock lock(&mu_);
  std::vector<v1::FunctionSignature> out;
  for (const auto& [name, f] : signatures_) out.push_back(f);
  return out;
}

}  // namespace shardmap
