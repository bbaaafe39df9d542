// libFuzzer target: --kwargs text as the coordinator and the workers take
// it. The first byte picks a built-in function; the rest is the kwargs
// text, which goes through ParseKwargs (nesting bounded by
// core/bounded_input.h before anything is parsed), CheckCall against that
// function's signature, and the dump a message would echo. Each must give
// a value or a clean error with a bounded message, never crash or
// overflow the stack. Seeds in corpus/kwargs/ include nesting far past the
// limit.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/bounded_input.h"
#include "wire/signature.h"
#include "worker/functions/function_registry.h"

namespace {

using namespace shardmap;

const std::vector<v1::FunctionSignature>& Signatures() {
  static const auto* signatures = [] {
    FunctionRegistry r;
    RegisterBuiltins(r);
    RegisterCollectiveBuiltins(r);
    RegisterStateBuiltins(r);
    return new std::vector<v1::FunctionSignature>(r.Signatures());
  }();
  return *signatures;
}

void CheckMessage(const absl::Status& s, const char* what) {
  // A message is short whatever the input: values are echoed truncated.
  if (s.message().empty() || s.message().size() > 2048) {
    std::fprintf(stderr, "kwargs_fuzzer: %s gave a message of %zu bytes\n",
                 what, s.message().size());
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const v1::FunctionSignature& sig =
      Signatures()[data[0] % Signatures().size()];
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  absl::StatusOr<nlohmann::json> kwargs = ParseKwargs(text);
  if (!kwargs.ok()) {
    CheckMessage(kwargs.status(), "ParseKwargs");
    return 0;
  }
  (void)kwargs->dump();
  std::vector<DType> dtypes(sig.arity(), DType::kFloat32);
  absl::StatusOr<nlohmann::json> resolved = CheckCall(sig, dtypes, *kwargs);
  if (!resolved.ok()) {
    CheckMessage(resolved.status(), "CheckCall");
    return 0;
  }
  (void)resolved->dump();
  return 0;
}
