// Reads sub-boxes of resident blocks from other workers over their Worker
// service (ReadBlock), on the process's ChannelCache. Thread-safe.
#ifndef SHARDMAP_WORKER_BLOCK_READER_H_
#define SHARDMAP_WORKER_BLOCK_READER_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "shardmap/v1/worker.grpc.pb.h"

namespace shardmap {

class ChannelCache;  // rpc/channel_cache.h
class BlockReader {
 public:
  // Not owned; outlives the reader.
  explicit BlockReader(ChannelCache* channels) : channels_(channels) {}

  // The bytes of the box `request` names. Errors: the holder's,
  // UNAVAILABLE if it cannot be reached, DEADLINE_EXCEEDED at `deadline`,
  // INTERNAL for chunks out of order.
  absl::StatusOr<std::string> Read(const std::string& address,
                                   const v1::ReadBlockRequest& request,
                                   absl::Time deadline);

 private:
  ChannelCache* const channels_;
};

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_BLOCK_READER_H_
