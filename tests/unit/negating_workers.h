// Test double of server/shard_channel.h's WorkerConnector for the
// coordinator's job tests: one-device workers that answer every job at
// once with each output the negated block of argument 0 (zeros for a
// resident argument, whose data they never get), and can be told to hold
// the next jobs until released, before they answer or before their last
// output chunk.
#ifndef SHARDMAP_TESTS_UNIT_NEGATING_WORKERS_H_
#define SHARDMAP_TESTS_UNIT_NEGATING_WORKERS_H_

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/tensor.h"
#include "server/shard_channel.h"
#include "wire/chunking.h"
#include "wire/proto_convert.h"

namespace shardmap {

// Shared by a NegatingWorkers and the channels it opened.
struct NegatingWorkersState {
  absl::Mutex mu;
  int opened ABSL_GUARDED_BY(mu) = 0;
  // The next this many channels wait in their first Read until released.
  int hold_next ABSL_GUARDED_BY(mu) = 0;
  // The next this many channels wait before their last message.
  int hold_last_next ABSL_GUARDED_BY(mu) = 0;
  int waiting ABSL_GUARDED_BY(mu) = 0;     // channels held right now
  int64_t chunks ABSL_GUARDED_BY(mu) = 0;  // argument chunks received
  int cancelled ABSL_GUARDED_BY(mu) = 0;   // channels cancelled
  bool released ABSL_GUARDED_BY(mu) = false;
};

// One device's job on a fake worker: every output is the negated block of
// argument 0 (zeros for a resident argument, whose data it never gets).
class NegatingChannel final : public ShardChannel {
 public:
  NegatingChannel(NegatingWorkersState* state, bool held, bool hold_last,
                  absl::Time deadline)
      : state_(state),
        held_(held),
        hold_last_(hold_last),
        deadline_(deadline) {}

  bool Write(const v1::ShardRequest& request) override {
    if (request.has_job()) job_ = request.job();
    if (request.has_chunk() && request.chunk().index() == 0) {
      arg0_ += request.chunk().data();
    }
    if (request.has_chunk()) {
      absl::MutexLock lock(&state_->mu);
      ++state_->chunks;
    }
    return true;
  }
  bool WritesDone() override { return true; }
  bool Read(v1::ShardResponse* response) override {
    if (!answered_) {
      if (held_ && !Wait()) return false;
      Answer();
      answered_ = true;
    }
    if (next_ >= responses_.size()) return false;
    if (hold_last_ && next_ + 1 == responses_.size() && !Wait()) return false;
    *response = responses_[next_++];
    return true;
  }
  absl::Status Finish() override {
    absl::MutexLock lock(&state_->mu);
    if (cancelled_) return absl::CancelledError("the job was cancelled");
    return absl::OkStatus();
  }
  void Cancel() override {
    absl::MutexLock lock(&state_->mu);
    if (!cancelled_) ++state_->cancelled;
    cancelled_ = true;
  }

 private:
  // Waits to be released; false if cancelled or past the deadline first.
  bool Wait() {
    absl::MutexLock lock(&state_->mu);
    ++state_->waiting;
    auto go = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu) {
      return state_->released || cancelled_;
    };
    state_->mu.AwaitWithDeadline(absl::Condition(&go), deadline_);
    --state_->waiting;
    return state_->released && !cancelled_;
  }
  void Answer() {
    const int64_t elements = arg0_.size() / sizeof(float);
    std::vector<float> negated(elements);
    for (int64_t i = 0; i < elements; ++i) {
      float v;
      std::memcpy(&v, arg0_.data() + i * sizeof(float), sizeof(float));
      negated[i] = -v;
    }
    Shape block(job_.args(0).shape().begin(), job_.args(0).shape().end());
    if (arg0_.empty()) negated.assign(NumElements(block), 0.0f);
    v1::ShardResponse outputs;
    v1::ShardOutputs* o = outputs.mutable_outputs();
    for (int i = 0; i < job_.send_outputs_size(); ++i) {
      *o->add_outputs() = HeaderToProto(DType::kFloat32, block);
      o->add_digests(0);
    }
    for (int i = 0; i < job_.states_size(); ++i) {
      o->add_state_digests(0);
      o->add_read_state_digests(0);
    }
    for (int i = 0; i < job_.resident_args_size(); ++i) {
      o->add_resident_arg_digests(0);
    }
    responses_.push_back(outputs);
    const char* bytes = reinterpret_cast<const char*>(negated.data());
    const size_t size = negated.size() * sizeof(float);
    for (int i = 0; i < job_.send_outputs_size(); ++i) {
      if (!job_.send_outputs(i)) continue;
      for (size_t at = 0; at < size; at += kChunkBytes) {
        v1::ShardResponse chunk;
        chunk.mutable_chunk()->set_index(i);
        chunk.mutable_chunk()->set_offset(at);
        chunk.mutable_chunk()->set_data(bytes + at,
                                        std::min(kChunkBytes, size - at));
        responses_.push_back(chunk);
      }
    }
  }

  NegatingWorkersState* const state_;
  const bool held_;
  const bool hold_last_;
  const absl::Time deadline_;
  bool cancelled_ ABSL_GUARDED_BY(state_->mu) = false;
  v1::ShardJob job_;
  std::string arg0_;
  bool answered_ = false;
  std::vector<v1::ShardResponse> responses_;
  size_t next_ = 0;
};

// Thread-safe.
class NegatingWorkers final : public WorkerConnector {
 public:
  std::unique_ptr<ShardChannel> Open(const std::string& address,
                                     absl::Time deadline) override {
    absl::MutexLock lock(&state_.mu);
    ++state_.opened;
    const bool held = state_.hold_next > 0;
    if (held) --state_.hold_next;
    const bool hold_last = state_.hold_last_next > 0;
    if (hold_last) --state_.hold_last_next;
    return std::make_unique<NegatingChannel>(&state_, held, hold_last,
                                             deadline);
  }
  absl::Status SkipTickets(const std::string& address,
                           const v1::SkipTicketsRequest& request,
                           absl::Time deadline) override {
    return absl::OkStatus();
  }
  // These workers keep nothing, so there is no version to drop.
  absl::Status DropVersion(const std::string& address, const std::string& name,
                           uint64_t version, absl::Time deadline) override {
    return absl::OkStatus();
  }

  // The next `n` jobs wait on their worker until Release.
  void HoldNext(int n) {
    absl::MutexLock lock(&state_.mu);
    state_.hold_next = n;
    state_.released = false;
  }
  // The next `n` jobs answer, but hold their last message until Release.
  void HoldLastNext(int n) {
    absl::MutexLock lock(&state_.mu);
    state_.hold_last_next = n;
    state_.released = false;
  }
  void Release() {
    absl::MutexLock lock(&state_.mu);
    state_.released = true;
  }
  int opened() {
    absl::MutexLock lock(&state_.mu);
    return state_.opened;
  }
  int waiting() {
    absl::MutexLock lock(&state_.mu);
    return state_.waiting;
  }
  int cancelled() {
    absl::MutexLock lock(&state_.mu);
    return state_.cancelled;
  }
  // Waits until the workers have received `n` argument chunks in all;
  // false if `timeout` passed first.
  bool AwaitChunks(int64_t n, absl::Duration timeout) {
    absl::MutexLock lock(&state_.mu);
    auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_.mu) {
      return state_.chunks >= n;
    };
    return state_.mu.AwaitWithTimeout(absl::Condition(&enough), timeout);
  }

 private:
  NegatingWorkersState state_;
};

}  // namespace shardmap

#endif  // SHARDMAP_TESTS_UNIT_NEGATING_WORKERS_H_
