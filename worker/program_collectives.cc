#include "worker/program_collectives.h"

#include <nlohmann/json.hpp>

namespace shardmap {

absl::StatusOr<Tensor> ProgramCollectives::Ppermute(
    const Tensor& x, const program::MeshAxes& axes,
    const std::vector<std::pair<int64_t, int64_t>>& perm) {
  nlohmann::json pairs = nlohmann::json::array();
  for (const auto& [source, destination] : perm) {
    pairs.push_back({source, destination});
  }
  return comm_->Ppermute(x, axes, pairs);
}

}  // namespace shardmap
