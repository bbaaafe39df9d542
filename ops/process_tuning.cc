#include "ops/process_tuning.h"

#include <malloc.h>

#include <cstdlib>
#include <string>

#include "absl/synchronization/mutex.h"
#include "core/idle_release.h"

namespace shardmap {
namespace {

// gRPC reads the variable once, when its first connection starts. An
// operator's own GRPC_EXPERIMENTS is kept; one that names tcp_read_chunks
// decides it.
void TurnOffGrpcReadChunks() {
  const char* set = std::getenv("GRPC_EXPERIMENTS");
  std::string experiments = set == nullptr ? "" : set;
  if (experiments.find("tcp_read_chunks") != std::string::npos) return;
  if (!experiments.empty()) experiments += ",";
  experiments += "-tcp_read_chunks";
  setenv("GRPC_EXPERIMENTS", experiments.c_str(), 1);
}

}  // namespace

void TuneProcess() {
  TurnOffGrpcReadChunks();
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 128 << 20);
  mallopt(M_ARENA_MAX, 1);
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  StartIdleMemoryRelease();
}

}  // namespace shardmap
