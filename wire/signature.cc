#include "wire/signature.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/bounded_input.h"
#include "core/status_util.h"
#include "wire/proto_convert.h"

namespace shardmap {
namespace {

bool IsAxes(const nlohmann::json& v) {
  if (v.is_string()) return true;
  if (!v.is_array()) return false;  // [] is JAX's (): no axes
  for (const auto& e : v) {
    if (!e.is_string()) return false;
  }
  return true;
}

bool IsIntPairs(const nlohmann::json& v) {
  if (!v.is_array()) return false;
  for (const auto& e : v) {
    if (!e.is_array() || e.size() != 2 || !e[0].is_number_integer() ||
        !e[1].is_number_integer()) {
      return false;
    }
  }
  return true;
}

}  // namespace

bool KwargHasType(const nlohmann::json& v, const std::string& type) {
  if (type == "number") return v.is_number();
  if (type == "integer") return v.is_number_integer();
  if (type == "boolean") return v.is_boolean();
  if (type == "axes") return IsAxes(v);
  if (type == "int_pairs") return IsIntPairs(v);
  if (type == "int_or_int_list_or_null") {
    if (v.is_null() || v.is_number_integer()) return true;
    if (!v.is_array()) return false;
    for (const auto& e : v) {
      if (!e.is_number_integer()) return false;
    }
    return true;
  }
  return true;  // "any" or unspecified
}

namespace {

std::string TypeDescription(const std::string& type) {
  if (type == "axes") return "an axis name or a list of axis names";
  if (type == "int_pairs") return "a list of [int, int] pairs";
  if (type == "int_or_int_list_or_null")
    return "an integer, a list of integers or null";
  return absl::StrCat("a JSON ", type);
}

}  // namespace

absl::StatusOr<nlohmann::json> ParseKwargs(absl::string_view text) {
  if (text.empty()) return nlohmann::json::object();
  SHARD_ASSIGN_OR_RETURN(
      nlohmann::json value,
      ParseJson(text, absl::StrCat("--kwargs JSON '", Truncate(text), "'")));
  if (!value.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--kwargs must be a JSON object such as '{\"alpha\": 2.0}', got '",
        Truncate(text), "'"));
  }
  return value;
}

absl::StatusOr<nlohmann::json> CheckCall(const v1::FunctionSignature& sig,
                                         const std::vector<DType>& arg_dtypes,
                                         const nlohmann::json& kwargs) {
  const std::string& fn = sig.name();
  if (static_cast<int>(arg_dtypes.size()) != sig.arity()) {
    return absl::InvalidArgumentError(absl::StrCat(
        SignatureText(sig), " takes ", sig.arity(), " positional argument",
        sig.arity() == 1 ? "" : "s", " but ", arg_dtypes.size(),
        arg_dtypes.size() == 1 ? " was" : " were", " given"));
  }
  if (sig.dtypes_size() > 0) {
    for (size_t i = 0; i < arg_dtypes.size(); ++i) {
      bool ok = false;
      std::vector<std::string> names;
      for (int d : sig.dtypes()) {
        auto dt = DTypeFromProto(static_cast<v1::DType>(d));
        if (!dt.ok()) continue;
        names.push_back(DTypeName(*dt));
        ok |= *dt == arg_dtypes[i];
      }
      if (!ok) {
        return absl::InvalidArgumentError(absl::StrCat(
            fn, ": args[", i, "] has dtype ", DTypeName(arg_dtypes[i]),
            ", which ", fn, " does not take; it takes ",
            absl::StrJoin(names, ", ")));
      }
    }
  }
  if (sig.same_dtype()) {
    for (size_t i = 1; i < arg_dtypes.size(); ++i) {
      if (arg_dtypes[i] != arg_dtypes[0]) {
        return absl::InvalidArgumentError(absl::StrCat(
            fn, " needs all arguments to have one dtype, but args[0] is ",
            DTypeName(arg_dtypes[0]), " and args[", i, "] is ",
            DTypeName(arg_dtypes[i])));
      }
    }
  }
  nlohmann::json resolved = nlohmann::json::object();
  for (const auto& [key, value] : kwargs.items()) {
    const v1::KwargSpec* spec = nullptr;
    for (const v1::KwargSpec& k : sig.kwargs()) {
      if (k.name() == key) spec = &k;
    }
    if (spec == nullptr) {
      std::vector<std::string> known;
      for (const v1::KwargSpec& k : sig.kwargs()) known.push_back(k.name());
      return absl::InvalidArgumentError(absl::StrCat(
          fn, " got an unexpected keyword argument '", Truncate(key), "'",
          known.empty()
              ? "; it takes none"
              : absl::StrCat("; it takes ", absl::StrJoin(known, ", "))));
    }
    if (!KwargHasType(value, spec->type())) {
      return absl::InvalidArgumentError(absl::StrCat(
          fn, ": keyword argument '", key, "' must be ",
          TypeDescription(spec->type()), ", got ", Truncate(value.dump())));
    }
    resolved[key] = value;
  }
  for (const v1::KwargSpec& k : sig.kwargs()) {
    if (resolved.contains(k.name())) continue;
    if (k.required()) {
      return absl::InvalidArgumentError(
          absl::StrCat(fn, " is missing the required keyword argument '",
                       k.name(), "' (", TypeDescription(k.type()),
                       "); pass it with --kwargs '{\"", k.name(), "\": ...}'"));
    }
    resolved[k.name()] = nlohmann::json::parse(k.default_json());
  }
  return resolved;
}

std::string SignatureText(const v1::FunctionSignature& sig) {
  static const char* kNames[] = {"x", "y", "z", "w", "v", "u"};
  std::vector<std::string> args;
  for (int i = 0; i < sig.arity(); ++i) {
    if (sig.name() == "matmul") {
      args.push_back(i == 0 ? "a" : "b");
    } else {
      args.push_back(i < 6 ? kNames[i] : absl::StrCat("arg", i));
    }
  }
  std::vector<std::string> kw;
  for (const v1::KwargSpec& k : sig.kwargs()) {
    kw.push_back(k.required() ? k.name()
                              : absl::StrCat(k.name(), "=", k.default_json()));
  }
  std::string text = absl::StrCat(sig.name(), "(", absl::StrJoin(args, ", "));
  if (!kw.empty()) absl::StrAppend(&text, "; ", absl::StrJoin(kw, ", "));
  return absl::StrCat(text, ")");
}

Signature::Signature(std::string name, int arity, int num_outputs) {
  proto_.set_name(std::move(name));
  proto_.set_arity(arity);
  proto_.set_num_outputs(num_outputs);
}

Signature& Signature::Kwarg(std::string name, std::string type,
                            std::string doc) {
  v1::KwargSpec* k = proto_.add_kwargs();
  k->set_name(std::move(name));
  k->set_type(std::move(type));
  k->set_required(true);
  k->set_doc(std::move(doc));
  return *this;
}

Signature& Signature::Kwarg(std::string name, std::string type,
                            std::string default_json, std::string doc) {
  v1::KwargSpec* k = proto_.add_kwargs();
  k->set_name(std::move(name));
  k->set_type(std::move(type));
  k->set_required(false);
  k->set_default_json(std::move(default_json));
  k->set_doc(std::move(doc));
  return *this;
}

Signature& Signature::DTypes(std::vector<DType> dtypes) {
  for (DType d : dtypes) proto_.add_dtypes(DTypeToProto(d));
  return *this;
}

Signature& Signature::SameDType() {
  proto_.set_same_dtype(true);
  return *this;
}

Signature& Signature::Collective(std::string op) {
  proto_.set_collective(std::move(op));
  return *this;
}

Signature& Signature::State(std::string name, bool write, std::string doc) {
  v1::StateSlotSpec* slot = proto_.add_states();
  slot->set_name(std::move(name));
  slot->set_write(write);
  slot->set_doc(std::move(doc));
  return *this;
}

Signature& Signature::Doc(std::string doc) {
  proto_.set_doc(std::move(doc));
  return *this;
}

Signature& Signature::ShapeProgram(std::string source) {
  proto_.set_shape_program(std::move(source));
  return *this;
}

}  // namespace shardmap
