// The framing of one message in a shared-memory ring (ShmSender writes
// it, ShmReceiver reads it): a fixed head, the job id and the
// fingerprint's text, then the payload; or, for a lent record (the
// payload stays in the sender's memory, shm_lent.h), a ShmLentRef. Both ends
// run on one host, from one build, so the head is copied as a plain struct.
#ifndef SHARDMAP_WORKER_SHM_RECORD_H_
#define SHARDMAP_WORKER_SHM_RECORD_H_

#include <cstdint>
#include <string>
#include <tuple>

namespace shardmap {

constexpr uint32_t kShmRecordMagic = 0x53484d52;  // "SHMR"
constexpr uint32_t kShmLentMagic = 0x53484d4c;    // "SHML"

struct ShmRecordHead {
  uint32_t magic = kShmRecordMagic;
  uint32_t job_bytes = 0;   // then the job id
  uint32_t text_bytes = 0;  // then the fingerprint text
  uint32_t step = 0;
  uint64_t seq = 0;
  int64_t from_device = 0;
  int64_t to_device = 0;
  uint64_t fingerprint = 0;
  uint64_t data_bytes = 0;  // then the payload
};

// (job, from device, to device, seq, step): what a receiver asks for.
using ShmMessageKey =
    std::tuple<std::string, int64_t, int64_t, uint64_t, uint32_t>;

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_SHM_RECORD_H_
