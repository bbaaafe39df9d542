#include "worker/transport/grpc/lent_slices.h"

#include <algorithm>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace shardmap {
namespace {
constexpr absl::Duration kAbortPoll = absl::Milliseconds(20);
}  // namespace

struct LentSlices::Count {
  mutable absl::Mutex mu;
  int64_t outstanding ABSL_GUARDED_BY(mu) = 0;
};

void LentSlices::Release(void* user_data) {
  auto* count = static_cast<std::shared_ptr<LentSlices::Count>*>(user_data);
  {
    absl::MutexLock lock(&(*count)->mu);
    --(*count)->outstanding;
  }
  delete count;
}

LentSlices::LentSlices() : count_(std::make_shared<Count>()) {}

grpc::Slice LentSlices::Lend(absl::Span<const uint8_t> bytes) {
  {
    absl::MutexLock lock(&count_->mu);
    ++count_->outstanding;
  }
  // gRPC never writes through a slice it sends.
  return grpc::Slice(const_cast<uint8_t*>(bytes.data()), bytes.size(), &Release,
                     new std::shared_ptr<Count>(count_));
}

int64_t LentSlices::outstanding() const {
  absl::MutexLock lock(&count_->mu);
  return count_->outstanding;
}

absl::Status LentSlices::AwaitReleased(
    absl::Time deadline, const std::function<absl::Status()>& aborted) {
  Count& c = *count_;
  absl::MutexLock lock(&c.mu);
  auto released = [&c]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(c.mu) {
    return c.outstanding == 0;
  };
  while (!released()) {
    if (absl::Status s = aborted(); !s.ok()) return s;
    const absl::Time now = absl::Now();
    if (now >= deadline) {
      return absl::DeadlineExceededError(
          "timed out waiting for gRPC to finish sending lent buffers");
    }
    c.mu.AwaitWithDeadline(absl::Condition(&released),
                           std::min(deadline, now + kAbortPoll));
  }
  return absl::OkStatus();
}

}  // namespace shardmap
