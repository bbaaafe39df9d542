#include "worker/functions/sdk_function.h"

#include <cctype>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/status_util.h"
#include "worker/functions/sdk_context.h"

namespace shardmap {
namespace {

bool IsIdentifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) {
    return false;
  }
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

bool KnownKwargType(const std::string& t) {
  static const std::set<std::string>* const kTypes = new std::set<std::string>{
      "number", "integer",   "boolean",
      "axes",   "int_pairs", "int_or_int_list_or_null",
      "any"};
  return kTypes->count(t) > 0;
}

bool KnownCollective(const std::string& c) {
  static const std::set<std::string>* const kOps = new std::set<std::string>{
      "",           "psum",         "pmean",    "pmax",       "pmin",
      "all_gather", "psum_scatter", "ppermute", "all_to_all", "axes"};
  return kOps->count(c) > 0;
}

// Every `{name}` of `source` names one of `kwargs`.
absl::Status CheckPlaceholders(const std::string& fn, const std::string& source,
                               const std::set<std::string>& kwargs) {
  for (size_t open = source.find('{'); open != std::string::npos;
       open = source.find('{', open + 1)) {
    const size_t close = source.find('}', open);
    if (close == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          fn, ": shape program '", source, "' has an unclosed '{'"));
    }
    const std::string name = source.substr(open + 1, close - open - 1);
    if (kwargs.count(name) == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(fn, ": shape program '", source, "' uses {", name,
                       "}, which is not a declared keyword argument"));
    }
  }
  return absl::OkStatus();
}

absl::Status Malformed(const std::string& fn, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("function '", fn, "': ", what));
}

// `item` (a keyword argument's or state slot's name) is an identifier not
// in `seen`; adds it.
absl::Status CheckNewName(const std::string& fn, const char* kind,
                          const std::string& item,
                          std::set<std::string>& seen) {
  if (IsIdentifier(item) && seen.insert(item).second) return absl::OkStatus();
  return Malformed(fn, absl::StrCat(kind, " '", item,
                                    "' is not an identifier or is declared "
                                    "twice"));
}

}  // namespace

absl::StatusOr<Signature> SignatureOf(const sdk::Function& fn) {
  const std::string& name = fn.name();
  if (!IsIdentifier(name)) {
    return Malformed(name, "its name must be an identifier");
  }
  if (fn.arity() < 0) return Malformed(name, "arity must be >= 0");
  if (fn.num_outputs() < 1) return Malformed(name, "it must have an output");
  if (!fn.kernel()) return Malformed(name, "no Kernel() was given");
  if (!KnownCollective(fn.collective())) {
    return Malformed(
        name, absl::StrCat("unknown collective '", fn.collective(), "'"));
  }
  Signature sig(name, fn.arity(), fn.num_outputs());
  std::set<std::string> kwarg_names;
  for (const sdk::KwargDecl& k : fn.kwargs()) {
    SHARD_RETURN_IF_ERROR(
        CheckNewName(name, "keyword argument", k.name, kwarg_names));
    if (!KnownKwargType(k.type)) {
      return Malformed(name, absl::StrCat("keyword argument '", k.name,
                                          "' has unknown type '", k.type, "'"));
    }
    if (k.required) {
      sig.Kwarg(k.name, k.type, k.doc);
      continue;
    }
    nlohmann::json value = nlohmann::json::parse(k.default_json, nullptr,
                                                 /*allow_exceptions=*/false);
    if (value.is_discarded()) {
      return Malformed(name, absl::StrCat("keyword argument '", k.name,
                                          "' has a default that is not JSON: ",
                                          k.default_json));
    }
    if (!KwargHasType(value, k.type)) {
      return Malformed(
          name, absl::StrCat("keyword argument '", k.name, "' has a default (",
                             k.default_json, ") that is not of its type '",
                             k.type, "'"));
    }
    sig.Kwarg(k.name, k.type, k.default_json, k.doc);
  }
  std::vector<DType> dtypes;
  for (sdk::DType d : fn.dtypes()) {
    if (static_cast<int32_t>(d) < 0 || static_cast<int32_t>(d) > 3) {
      return Malformed(name,
                       absl::StrCat("unknown dtype ", static_cast<int32_t>(d)));
    }
    dtypes.push_back(FromSdk(d));
  }
  sig.DTypes(std::move(dtypes));
  if (fn.same_dtype()) sig.SameDType();
  std::set<std::string> slots;
  for (const sdk::StateDecl& s : fn.states()) {
    SHARD_RETURN_IF_ERROR(CheckNewName(name, "state slot", s.name, slots));
    sig.State(s.name, s.write, s.doc);
  }
  SHARD_RETURN_IF_ERROR(
      CheckPlaceholders(name, fn.shape_program(), kwarg_names));
  sig.Doc(fn.doc()).ShapeProgram(fn.shape_program());
  if (!fn.collective().empty()) sig.Collective(fn.collective());
  return sig;
}

Kernel KernelOf(sdk::Function fn) {
  return
      [fn = std::move(fn)](
          const CallContext& call, std::vector<Tensor>& args,
          const nlohmann::json& kwargs) -> absl::StatusOr<std::vector<Tensor>> {
        WorkerContext ctx(fn.name(), call, args, kwargs);
        absl::StatusOr<std::vector<sdk::TensorView>> out;
        try {
          out = fn.kernel()(ctx, ctx.ArgViews());
        } catch (const std::exception& e) {
          return absl::InternalError(
              absl::StrCat(fn.name(), " threw a C++ exception: ", e.what()));
        } catch (...) {
          return absl::InternalError(absl::StrCat(
              fn.name(), " threw a C++ exception of unknown type"));
        }
        if (!out.ok()) {
          if (absl::StartsWith(out.status().message(), fn.name())) {
            return out.status();
          }
          return absl::Status(
              out.status().code(),
              absl::StrCat(fn.name(), ": ", out.status().message()));
        }
        absl::StatusOr<std::vector<Tensor>> tensors = ctx.TakeOutputs(*out);
        if (!tensors.ok()) {
          return absl::InternalError(
              absl::StrCat(fn.name(), ": ", tensors.status().message()));
        }
        return tensors;
      };
}

}  // namespace shardmap
