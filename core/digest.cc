#include "core/digest.h"

#include <xxhash.h>

#include <memory>

namespace shardmap {

uint64_t Digest(const Tensor& tensor) {
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> state(
      XXH3_createState(), &XXH3_freeState);
  XXH3_64bits_reset(state.get());
  const int32_t dtype = static_cast<int32_t>(tensor.dtype());
  const int64_t rank = tensor.rank();
  XXH3_64bits_update(state.get(), &dtype, sizeof(dtype));
  XXH3_64bits_update(state.get(), &rank, sizeof(rank));
  XXH3_64bits_update(state.get(), tensor.shape().data(),
                     tensor.shape().size() * sizeof(int64_t));
  XXH3_64bits_update(state.get(), tensor.data(), tensor.num_bytes());
  return XXH3_64bits_digest(state.get());
}

uint64_t DigestPieces(uint64_t seed,
                      absl::Span<const absl::string_view> pieces) {
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> state(
      XXH3_createState(), &XXH3_freeState);
  XXH3_64bits_reset_withSeed(state.get(), seed);
  for (absl::string_view piece : pieces) {
    XXH3_64bits_update(state.get(), piece.data(), piece.size());
  }
  return XXH3_64bits_digest(state.get());
}

}  // namespace shardmap
