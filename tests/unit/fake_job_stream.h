// Test double of server/job_stream.h: a client's RunJob stream whose
// messages are given up front, and which keeps what the service answered.
#ifndef SHARDMAP_TESTS_UNIT_FAKE_JOB_STREAM_H_
#define SHARDMAP_TESTS_UNIT_FAKE_JOB_STREAM_H_

#include <atomic>
#include <functional>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/tensor.h"
#include "server/job_stream.h"
#include "wire/chunking.h"
#include "wire/proto_convert.h"

namespace shardmap {

// Not thread-safe: one job's thread uses it (cancelled() is atomic).
class FakeJobStream final : public JobStream {
 public:
  // A stream carrying `spec`, then `args` as chunks.
  FakeJobStream(const v1::JobSpec& spec,
                const std::vector<const Tensor*>& args) {
    v1::RunJobRequest first;
    *first.mutable_spec() = spec;
    requests_.push_back(std::move(first));
    for (size_t i = 0; i < args.size(); ++i) {
      SendTensorChunks(static_cast<uint32_t>(i), *args[i],
                       [&](v1::ArrayChunk&& chunk) {
                         v1::RunJobRequest r;
                         *r.mutable_chunk() = std::move(chunk);
                         requests_.push_back(std::move(r));
                         return true;
                       });
    }
  }

  bool Read(v1::RunJobRequest* request) override {
    if (next_ >= requests_.size()) return false;
    if (before_read_ && !before_read_(next_)) return false;
    *request = requests_[next_++];
    return true;
  }
  bool Write(const v1::RunJobResponse& response) override {
    responses_.push_back(response);
    ++writes_;
    return true;
  }
  bool WriteLast(const v1::RunJobResponse& response) override {
    wrote_last_ = true;
    return Write(response);
  }
  bool cancelled() const override { return cancelled_; }

  void Cancel() { cancelled_ = true; }
  // Called before the service reads message `i` (0 is the JobSpec);
  // returning false ends the stream there, as a client that went away.
  void BeforeRead(std::function<bool(size_t i)> hook) {
    before_read_ = std::move(hook);
  }
  // The client's messages, to be altered before the service reads them.
  std::vector<v1::RunJobRequest>& requests() { return requests_; }
  // How many of the client's messages the service read.
  size_t reads() const { return next_; }
  // How many messages the service wrote so far (any thread may ask).
  size_t writes() const { return writes_; }
  // True once the service wrote its last message (WriteLast).
  bool wrote_last() const { return wrote_last_; }
  const std::vector<v1::RunJobResponse>& responses() const {
    return responses_;
  }
  // The JobResult the service sent first. FAILED_PRECONDITION if none.
  absl::StatusOr<v1::JobResult> result() const {
    if (responses_.empty() || !responses_[0].has_result()) {
      return absl::FailedPreconditionError("no JobResult was sent");
    }
    return responses_[0].result();
  }
  // Returned output `o` reassembled from the chunks inside the result
  // (JobResult.chunks) and those that followed it. FAILED_PRECONDITION
  // without a result.
  absl::StatusOr<Tensor> Output(int o) const {
    absl::StatusOr<v1::JobResult> r = result();
    if (!r.ok()) return r.status();
    if (o >= r->outputs_size()) {
      return absl::FailedPreconditionError("no such output");
    }
    absl::StatusOr<ArrayMeta> meta = HeaderFromProto(r->outputs(o), "output");
    if (!meta.ok()) return meta.status();
    Tensor out(meta->dtype, meta->shape);
    std::vector<const v1::ArrayChunk*> chunks;
    for (const v1::ArrayChunk& c : r->chunks()) chunks.push_back(&c);
    for (size_t i = 1; i < responses_.size(); ++i) {
      if (responses_[i].has_chunk()) chunks.push_back(&responses_[i].chunk());
    }
    size_t at = 0;
    for (const v1::ArrayChunk* chunk : chunks) {
      const v1::ArrayChunk& c = *chunk;
      if (c.index() != static_cast<uint32_t>(o)) continue;
      if (c.offset() != at || at + c.data().size() > out.num_bytes()) {
        return absl::FailedPreconditionError("chunks out of order");
      }
      std::copy(c.data().begin(), c.data().end(), out.data() + at);
      at += c.data().size();
    }
    if (at != out.num_bytes()) {
      return absl::FailedPreconditionError("output incomplete");
    }
    return out;
  }

 private:
  std::vector<v1::RunJobRequest> requests_;
  std::function<bool(size_t)> before_read_;
  size_t next_ = 0;
  std::vector<v1::RunJobResponse> responses_;
  std::atomic<size_t> writes_{0};
  bool wrote_last_ = false;
  std::atomic<bool> cancelled_{false};
};

}  // namespace shardmap

#endif  // SHARDMAP_TESTS_UNIT_FAKE_JOB_STREAM_H_
