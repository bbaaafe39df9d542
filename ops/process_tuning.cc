#include "ops/process_tuning.h"

#include <malloc.h>

#include "absl/synchronization/mutex.h"
#include "core/idle_release.h"

namespace shardmap {

void TuneProcess() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 128 << 20);
  mallopt(M_ARENA_MAX, 1);
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  StartIdleMemoryRelease();
}

}  // namespace shardmap
