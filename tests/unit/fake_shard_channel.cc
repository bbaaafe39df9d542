#include "tests/unit/fake_shard_channel.h"

#include "core/digest.h"
#include "wire/chunking.h"
#include "wire/proto_convert.h"

namespace shardmap {
namespace {

// A bound on the fake's own waits, so that a broken test fails instead of
// hanging; never reached when all is well.
constexpr absl::Duration kFakeWaitLimit = absl::Seconds(60);

}  // namespace

// One stream to a fake worker. Its state lives under the connector's lock.
class FakeShardChannel final : public ShardChannel {
 public:
  FakeShardChannel(FakeWorkerConnector* c, std::string address,
                   absl::Time deadline)
      : c_(c), address_(std::move(address)), deadline_(deadline) {
    absl::MutexLock lock(&c_->mu_);
    script_ = c_->workers_[address_].script;
  }

  bool Write(const v1::ShardRequest& request) override {
    absl::MutexLock lock(&c_->mu_);
    const int write = writes_++;
    if (write == script_.block_write) WaitLocked([] { return false; });
    if (write == script_.fail_write) broken_ = true;
    if (Ended()) return false;
    c_->workers_[address_].sent.push_back(request);
    if (request.has_job()) two_phase_ = request.job().two_phase();
    if (request.has_decision()) {
      decided_ = true;
      commit_ = request.decision().commit();
    }
    return true;
  }
  bool WritesDone() override {
    absl::MutexLock lock(&c_->mu_);
    return !Ended();
  }
  bool Read(v1::ShardResponse* response) override {
    absl::MutexLock lock(&c_->mu_);
    const int read = reads_++;
    if (read == script_.block_read || (commit_ && script_.block_after_commit)) {
      WaitLocked([] { return false; });
    }
    if (Ended()) return false;
    if (next_ < script_.responses.size()) {
      *response = script_.responses[next_++];
      ++c_->workers_[address_].delivered;
      return true;
    }
    // A two-phase worker has nothing more to say until the decision.
    if (two_phase_ && !decided_)
      WaitLocked([this] {
        c_->mu_.AssertHeld();
        return decided_;
      });
    return false;
  }
  ~FakeShardChannel() override {
    absl::MutexLock lock(&c_->mu_);
    if (signal_ != nullptr) {
      c_->signals_.erase(c_->signals_.find(signal_));
    }
    if (awaited_) --c_->workers_[address_].waiting;
  }
  // Readable unless the next read is one that waits, and the stream has
  // not ended.
  bool Readable() override {
    absl::MutexLock lock(&c_->mu_);
    const bool waits =
        reads_ == script_.block_read || (commit_ && script_.block_after_commit);
    const bool readable = !waits || Ended();
    // Counted as waiting while its caller waits for it.
    if (readable == awaited_) {
      awaited_ = !readable;
      c_->workers_[address_].waiting += awaited_ ? 1 : -1;
    }
    return readable;
  }
  // Complete once no read from here on waits: none is scripted to, and a
  // two-phase stream has its decision.
  bool Complete() override {
    absl::MutexLock lock(&c_->mu_);
    if (Ended()) return true;
    if (script_.block_read >= reads_) return false;
    return !two_phase_ || decided_;
  }
  // Notified when the stream is cancelled and when the clock moves.
  void SetReadableSignal(ChangeSignal* signal) override {
    absl::MutexLock lock(&c_->mu_);
    if (signal_ != nullptr) c_->signals_.erase(c_->signals_.find(signal_));
    signal_ = signal;
    c_->signals_.insert(signal);
  }
  absl::Status Finish() override {
    absl::MutexLock lock(&c_->mu_);
    ++c_->workers_[address_].finished;
    if (cancelled_) return absl::CancelledError("Cancelled");
    if (Expired()) return absl::DeadlineExceededError("Deadline Exceeded");
    if (commit_) return script_.commit_finish;
    return script_.finish;
  }
  void Cancel() override {
    absl::MutexLock lock(&c_->mu_);
    cancelled_ = true;
    if (signal_ != nullptr) signal_->Notify();
  }

 private:
  bool Expired() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(c_->mu_) {
    return c_->now_ >= deadline_;
  }
  bool Ended() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(c_->mu_) {
    return broken_ || cancelled_ || Expired();
  }
  // Waits until the stream ends (cancelled, past its deadline) or `also`.
  void WaitLocked(const std::function<bool()>& also)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(c_->mu_) {
    ++c_->workers_[address_].waiting;
    auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(c_->mu_) {
      return Ended() || also();
    };
    c_->mu_.AwaitWithTimeout(absl::Condition(&done), kFakeWaitLimit);
    --c_->workers_[address_].waiting;
  }

  FakeWorkerConnector* const c_;
  const std::string address_;
  const absl::Time deadline_;
  FakeWorkerScript script_;
  int writes_ ABSL_GUARDED_BY(c_->mu_) = 0;
  int reads_ ABSL_GUARDED_BY(c_->mu_) = 0;
  size_t next_ ABSL_GUARDED_BY(c_->mu_) = 0;
  bool broken_ ABSL_GUARDED_BY(c_->mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(c_->mu_) = false;
  bool two_phase_ ABSL_GUARDED_BY(c_->mu_) = false;
  bool decided_ ABSL_GUARDED_BY(c_->mu_) = false;
  bool commit_ ABSL_GUARDED_BY(c_->mu_) = false;
  ChangeSignal* signal_ ABSL_GUARDED_BY(c_->mu_) = nullptr;
  bool awaited_ ABSL_GUARDED_BY(c_->mu_) = false;  // Readable said no
};

void FakeWorkerConnector::Script(const std::string& address,
                                 FakeWorkerScript script) {
  absl::MutexLock lock(&mu_);
  workers_[address].script = std::move(script);
}

absl::Time FakeWorkerConnector::Now() const {
  absl::MutexLock lock(&mu_);
  return now_;
}

void FakeWorkerConnector::Advance(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  now_ += d;
  for (ChangeSignal* signal : signals_) signal->Notify();
}

std::unique_ptr<ShardChannel> FakeWorkerConnector::Open(
    const std::string& address, absl::Time deadline) {
  return std::make_unique<FakeShardChannel>(this, address, deadline);
}

std::unique_ptr<ShardChannel> FakeWorkerConnector::OpenSmall(
    const std::string& address, absl::Time deadline) {
  {
    absl::MutexLock lock(&mu_);
    ++workers_[address].small_opens;
  }
  return Open(address, deadline);
}

bool FakeWorkerConnector::SmallReady(const std::string& address,
                                     absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  ++workers_[address].small_ready_asks;
  return small_ready_;
}

void FakeWorkerConnector::SetSmallReady(bool ready) {
  absl::MutexLock lock(&mu_);
  small_ready_ = ready;
}

int FakeWorkerConnector::SmallOpens(const std::string& address) const {
  absl::MutexLock lock(&mu_);
  return FieldLocked(address, &Worker::small_opens);
}

int FakeWorkerConnector::SmallReadyAsks(const std::string& address) const {
  absl::MutexLock lock(&mu_);
  return FieldLocked(address, &Worker::small_ready_asks);
}

absl::Status FakeWorkerConnector::SkipTickets(
    const std::string& address, const v1::SkipTicketsRequest& request,
    absl::Time) {
  absl::MutexLock lock(&mu_);
  Worker& w = workers_[address];
  ++w.skip_calls;
  if (!w.script.skip.ok()) return w.script.skip;
  for (uint64_t t : request.tickets()) {
    w.skips.emplace_back(request.worker_id(), t);
  }
  return absl::OkStatus();
}

absl::Status FakeWorkerConnector::DropVersion(const std::string& address,
                                              const std::string& name,
                                              uint64_t version, absl::Time) {
  absl::MutexLock lock(&mu_);
  Worker& w = workers_[address];
  w.drops.emplace_back(name, version);
  return w.script.drop;
}

std::vector<v1::ShardRequest> FakeWorkerConnector::Sent(
    const std::string& address) const {
  absl::MutexLock lock(&mu_);
  return FieldLocked(address, &Worker::sent);
}

std::vector<bool> FakeWorkerConnector::Decisions(
    const std::string& address) const {
  std::vector<bool> out;
  for (const v1::ShardRequest& r : Sent(address)) {
    if (r.has_decision()) out.push_back(r.decision().commit());
  }
  return out;
}

std::vector<std::pair<std::string, uint64_t>> FakeWorkerConnector::Drops(
    const std::string& address) const {
  absl::MutexLock lock(&mu_);
  return FieldLocked(address, &Worker::drops);
}

std::vector<std::pair<std::string, uint64_t>> FakeWorkerConnector::Skips(
    const std::string& address) const {
  absl::MutexLock lock(&mu_);
  return FieldLocked(address, &Worker::skips);
}

int FakeWorkerConnector::SkipCalls(const std::string& address) const {
  absl::MutexLock lock(&mu_);
  return FieldLocked(address, &Worker::skip_calls);
}

int FakeWorkerConnector::Waiting(const std::string& address) const {
  absl::MutexLock lock(&mu_);
  return WaitingLocked(address);
}

int FakeWorkerConnector::WaitingLocked(const std::string& address) const {
  return FieldLocked(address, &Worker::waiting);
}

int FakeWorkerConnector::Finished(const std::string& address) const {
  absl::MutexLock lock(&mu_);
  return FinishedLocked(address);
}

int FakeWorkerConnector::FinishedLocked(const std::string& address) const {
  return FieldLocked(address, &Worker::finished);
}

int FakeWorkerConnector::Delivered(const std::string& address) const {
  absl::MutexLock lock(&mu_);
  return FieldLocked(address, &Worker::delivered);
}

bool FakeWorkerConnector::WaitFor(const std::function<bool()>& done,
                                  absl::Duration limit) const {
  absl::MutexLock lock(&mu_);
  auto cond = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return done(); };
  return mu_.AwaitWithTimeout(absl::Condition(&cond), limit);
}

std::vector<v1::ShardResponse> FakeAnswer(
    const JobPlan& plan, int64_t device, const std::vector<Tensor>& blocks,
    const std::vector<uint64_t>& state_digests) {
  std::vector<v1::ShardResponse> out(1);
  v1::ShardOutputs* outputs = out[0].mutable_outputs();
  for (const Tensor& t : blocks) {
    *outputs->add_outputs() = HeaderToProto(t.dtype(), t.shape());
    outputs->add_digests(Digest(t));
  }
  for (size_t i = 0; i < plan.states.size(); ++i) {
    outputs->add_state_digests(i < state_digests.size() ? state_digests[i] : 0);
    outputs->add_read_state_digests(0);
  }
  for (size_t i = 0; i < plan.args.size(); ++i) {
    outputs->add_resident_arg_digests(0);
  }
  for (const StatePlan& st : plan.states) {
    if (st.out_spec.has_value()) outputs->set_state_out_specs_applied(true);
  }
  for (size_t o = 0; o < blocks.size(); ++o) {
    if (!plan.StoredAs(o).empty() ||
        !plan.IsOutputRepresentative(static_cast<int>(o), device)) {
      continue;
    }
    SendTensorChunks(static_cast<uint32_t>(o), blocks[o],
                     [&](v1::ArrayChunk&& chunk) {
                       v1::ShardResponse r;
                       *r.mutable_chunk() = std::move(chunk);
                       out.push_back(std::move(r));
                       return true;
                     });
  }
  return out;
}

std::vector<v1::ShardResponse> FakeAnswer(const JobPlan& plan, int64_t device,
                                          const Tensor& block) {
  std::vector<Tensor> blocks;
  blocks.push_back(block.Clone());
  return FakeAnswer(plan, device, blocks);
}

}  // namespace shardmap
