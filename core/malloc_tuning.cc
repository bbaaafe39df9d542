#include "core/malloc_tuning.h"

#include <malloc.h>

namespace shardmap {

void TuneMallocForStreaming() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 128 << 20);
}

}  // namespace shardmap
