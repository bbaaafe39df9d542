// Test helper: fake workers behind the coordinator's WorkerConnector, so
// the job runner and its pieces run without a process or a socket. Each
// worker address gets a script: what its streams answer, which write
// fails, which read waits until the stream is cancelled or its deadline
// passes, and the status each call ends with. Deadlines follow the
// connector's own clock, which only the test advances, so a timeout is
// something the test makes happen, never something a slow machine causes.
//
// Everything the coordinator sends (job headers, chunks, decisions, skips,
// drops) is recorded per address. Tests order their steps with WaitFor
// (a bounded wait on the fake's state), never with sleeps.
//
// Thread-safe: one mutex guards every fake worker, its streams and the
// clock.
#ifndef SHARDMAP_TESTS_UNIT_FAKE_SHARD_CHANNEL_H_
#define SHARDMAP_TESTS_UNIT_FAKE_SHARD_CHANNEL_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/tensor.h"
#include "server/planner.h"
#include "server/shard_channel.h"

namespace shardmap {

// How the fake worker at one address behaves.
struct FakeWorkerScript {
  // What each stream answers, in order, to the coordinator's reads (see
  // FakeAnswer). After the last one a two-phase stream waits for the
  // decision; any other stream ends.
  std::vector<v1::ShardResponse> responses;
  // The write that fails, counting from 0 (the job header) over the
  // stream's writes; -1: none.
  int fail_write = -1;
  // The write that waits until the stream is cancelled or its deadline
  // passes, and then fails; -1: none.
  int block_write = -1;
  // The read (counting from 0) that waits until the stream is cancelled
  // or its deadline passes; -1: none.
  int block_read = -1;
  // What Finish returns for a stream that ended by itself.
  absl::Status finish;
  // What Finish returns after a commit decision (the worker applying its
  // writes), and whether the stream waits, after the decision, until it is
  // cancelled or its deadline passes.
  absl::Status commit_finish;
  bool block_after_commit = false;
  // What the unary calls return.
  absl::Status skip;
  absl::Status drop;
};

class FakeWorkerConnector final : public WorkerConnector {
 public:
  FakeWorkerConnector() = default;
  FakeWorkerConnector(const FakeWorkerConnector&) = delete;
  FakeWorkerConnector& operator=(const FakeWorkerConnector&) = delete;

  // Sets the script of `address` for the streams opened from now on.
  // Addresses without a script answer nothing and end OK.
  void Script(const std::string& address, FakeWorkerScript script);

  // The fake clock stream deadlines are measured by.
  absl::Time Now() const;
  void Advance(absl::Duration d);

  std::unique_ptr<ShardChannel> Open(const std::string& address,
                                     absl::Time deadline) override;
  // Open, counted per address (SmallOpens).
  std::unique_ptr<ShardChannel> OpenSmall(const std::string& address,
                                          absl::Time deadline) override;
  // Its streams tell when they are readable; they are up unless
  // SetSmallReady(false). Counted per address (SmallReadyAsks).
  bool SmallReady(const std::string& address, absl::Time deadline) override;
  void SetSmallReady(bool ready);
  int SmallOpens(const std::string& address) const;
  int SmallReadyAsks(const std::string& address) const;
  absl::Status SkipTickets(const std::string& address,
                           const v1::SkipTicketsRequest& request,
                           absl::Time deadline) override;
  absl::Status DropVersion(const std::string& address, const std::string& name,
                           uint64_t version, absl::Time deadline) override;

  // What reached `address` (writes that succeeded), over all its streams.
  std::vector<v1::ShardRequest> Sent(const std::string& address) const;
  // The decisions sent to `address` (true: commit), in order.
  std::vector<bool> Decisions(const std::string& address) const;
  // The (name, version) pairs `address` was told to drop.
  std::vector<std::pair<std::string, uint64_t>> Drops(
      const std::string& address) const;
  // The (worker id, ticket) pairs `address` was told to skip, and how many
  // SkipTickets calls it got (failed ones included).
  std::vector<std::pair<std::string, uint64_t>> Skips(
      const std::string& address) const;
  int SkipCalls(const std::string& address) const;
  // How many of `address`'s streams wait (block_write, block_read,
  // block_after_commit, or a two-phase stream waiting for its decision),
  // how many were finished, and how many scripted responses they handed
  // out.
  int Waiting(const std::string& address) const;
  int Finished(const std::string& address) const;
  int Delivered(const std::string& address) const;

  // Waits until `done` holds, at most `limit`; `done` runs under the
  // fake's lock, so it may call only the lock-free members below.
  bool WaitFor(const std::function<bool()>& done,
               absl::Duration limit = absl::Seconds(30)) const;
  // Lock-held variants for WaitFor predicates, which first call
  // AssertHeld (so clang's analysis knows the lock is held there).
  void AssertHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK(mu_) { mu_.AssertHeld(); }
  int WaitingLocked(const std::string& address) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int FinishedLocked(const std::string& address) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

 private:
  friend class FakeShardChannel;
  struct Worker {
    FakeWorkerScript script;
    std::vector<v1::ShardRequest> sent;
    std::vector<std::pair<std::string, uint64_t>> drops;
    std::vector<std::pair<std::string, uint64_t>> skips;
    int skip_calls = 0;
    int waiting = 0;
    int finished = 0;
    int delivered = 0;
    int small_opens = 0;
    int small_ready_asks = 0;
  };
  // A field of `address`'s record, or the field's empty value when the
  // address has none.
  template <typename T>
  T FieldLocked(const std::string& address, T Worker::*field) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = workers_.find(address);
    return it == workers_.end() ? T{} : it->second.*field;
  }

  mutable absl::Mutex mu_;
  std::map<std::string, Worker> workers_ ABSL_GUARDED_BY(mu_);
  absl::Time now_ ABSL_GUARDED_BY(mu_) = absl::FromUnixSeconds(1'000'000);
  bool small_ready_ ABSL_GUARDED_BY(mu_) = true;
  // The readable signals of the open streams that have one (a serial
  // fan-out's), notified when the clock moves.
  std::multiset<ChangeSignal*> signals_ ABSL_GUARDED_BY(mu_);
};

// Device `device`'s answer to `plan`: ShardOutputs with the header and
// digest of its block of each output (`blocks`, one per output), zero
// digests for states and arguments unless `state_digests` (one per
// plan.states entry) is given, then the chunks of the outputs the
// coordinator asks this device for (returned outputs, on representative
// devices).
std::vector<v1::ShardResponse> FakeAnswer(
    const JobPlan& plan, int64_t device, const std::vector<Tensor>& blocks,
    const std::vector<uint64_t>& state_digests = {});

// The same for a function with one output.
std::vector<v1::ShardResponse> FakeAnswer(const JobPlan& plan, int64_t device,
                                          const Tensor& block);

}  // namespace shardmap

#endif  // SHARDMAP_TESTS_UNIT_FAKE_SHARD_CHANNEL_H_
