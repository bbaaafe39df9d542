// libFuzzer target: the .npy decoder (core/npy ParseNpy, the function
// ReadNpy runs on a file's bytes). Whatever decodes must encode
// (SerializeNpy) to bytes that decode to the same dtype, shape and data;
// anything else must be INVALID_ARGUMENT or RESOURCE_EXHAUSTED, never a
// crash, a leak or an over-read.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace shardmap;
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<Tensor> t = ParseNpy(bytes, "fuzz.npy");
  if (!t.ok()) {
    const absl::StatusCode code = t.status().code();
    if (code != absl::StatusCode::kInvalidArgument &&
        code != absl::StatusCode::kResourceExhausted) {
      std::fprintf(stderr, "npy_fuzzer: unexpected %s\n",
                   t.status().ToString().c_str());
      std::abort();
    }
    return 0;
  }
  const std::string again = SerializeNpy(*t);
  absl::StatusOr<Tensor> u = ParseNpy(again, "again.npy");
  if (!u.ok() || u->dtype() != t->dtype() || u->shape() != t->shape() ||
      std::memcmp(u->data(), t->data(), t->num_bytes()) != 0) {
    std::fprintf(stderr, "npy_fuzzer: SerializeNpy does not round-trip: %s\n",
                 u.ok() ? "different array" : u.status().ToString().c_str());
    std::abort();
  }
  return 0;
}
