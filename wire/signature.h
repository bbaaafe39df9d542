// Function signatures: what a registered function accepts (arity, dtypes,
// keyword arguments), checked before anything runs, on the coordinator and
// again on the worker.
#ifndef SHARDMAP_CORE_SIGNATURE_H_
#define SHARDMAP_CORE_SIGNATURE_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/dtype.h"
#include "shardmap/v1/common.pb.h"

namespace shardmap {

// Parses the --kwargs text: a JSON object, or empty (= {}).
// INVALID_ARGUMENT with the parser's position for malformed JSON or a value
// that is not an object.
absl::StatusOr<nlohmann::json> ParseKwargs(absl::string_view text);

// Checks a call against `sig`: number of arguments, their dtypes, unknown or
// missing keyword arguments and their JSON types. Returns the keyword
// arguments with defaults filled in. INVALID_ARGUMENT naming the argument
// or keyword otherwise.
absl::StatusOr<nlohmann::json> CheckCall(const v1::FunctionSignature& sig,
                                         const std::vector<DType>& arg_dtypes,
                                         const nlohmann::json& kwargs);

// Whether `value` is a keyword argument value of `type` ("number",
// "integer", "boolean", "axes", "int_pairs", "int_or_int_list_or_null";
// any other type accepts everything).
bool KwargHasType(const nlohmann::json& value, const std::string& type);

// "matmul(a, b)", "scale(x; alpha)" - for listings and messages.
std::string SignatureText(const v1::FunctionSignature& sig);

// Builder used by function registrations:
//   Signature("scale", 1).Kwarg("alpha", "number").Doc("x * alpha")
class Signature {
 public:
  Signature(std::string name, int arity, int num_outputs = 1);
  // A required keyword argument.
  Signature& Kwarg(std::string name, std::string type, std::string doc = "");
  // An optional keyword argument with a default, given as JSON text.
  Signature& Kwarg(std::string name, std::string type, std::string default_json,
                   std::string doc);
  Signature& DTypes(std::vector<DType> dtypes);
  Signature& SameDType();
  Signature& Doc(std::string doc);
  // The function's shape program (FunctionSignature.shape_program).
  Signature& ShapeProgram(std::string source);
  // The jax.lax collective the function performs (see common.proto).
  Signature& Collective(std::string op);
  // A state slot the function reads (and, with `write`, updates).
  Signature& State(std::string name, bool write, std::string doc = "");
  const v1::FunctionSignature& proto() const { return proto_; }

 private:
  v1::FunctionSignature proto_;
};

}  // namespace shardmap

#endif  // SHARDMAP_CORE_SIGNATURE_H_
