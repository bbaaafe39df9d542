// Memory lent to gRPC without a copy: a grpc::Slice over a caller's bytes
// that reports when gRPC has let go of it.
//
// A PeerTransport's Lend sends straight from the caller's buffer; the
// caller may reuse or free it only once Settle returns. LentSlices counts
// the slices made over such buffers that gRPC still holds (queued, being
// written to the socket, or kept by the frame that carried them) and
// lets Settle wait until none is left. gRPC drops its references once the
// bytes are in the kernel, or when the stream or connection carrying them
// fails or is cancelled.
//
// Thread-safe. The counter lives as long as the last slice made from it,
// so a slice that gRPC releases late never touches freed memory (the lent
// bytes themselves are the caller's to keep alive until Settle).
#ifndef SHARDMAP_WORKER_TRANSPORT_GRPC_LENT_SLICES_H_
#define SHARDMAP_WORKER_TRANSPORT_GRPC_LENT_SLICES_H_

#include <grpcpp/support/slice.h>

#include <cstdint>
#include <functional>
#include <memory>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace shardmap {

class LentSlices {
 public:
  LentSlices();

  // A slice over `bytes` (not copied), counted until gRPC releases it.
  grpc::Slice Lend(absl::Span<const uint8_t> bytes);

  // Slices made by Lend that are not released yet.
  int64_t outstanding() const;

  // Waits until every lent slice is released, at most until `deadline`,
  // checking `aborted` every few milliseconds. OK once none is left, else
  // DEADLINE_EXCEEDED or what `aborted` returned.
  absl::Status AwaitReleased(absl::Time deadline,
                             const std::function<absl::Status()>& aborted);

 private:
  struct Count;
  // What gRPC calls when it drops a lent slice: `user_data` is the slice's
  // own reference to the counter.
  static void Release(void* user_data);

  std::shared_ptr<Count> count_;
};

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_TRANSPORT_GRPC_LENT_SLICES_H_
