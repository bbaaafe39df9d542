// The resident arrays one job writes (its stored outputs and written
// states), from the versions it writes to what the index publishes.
//
// A job that writes resident arrays is two-phase: each worker stages its
// blocks under the versions issued here, and applies them only on the
// coordinator's decision (server/shard_call.h SendDecision). The index
// publishes the new versions only if every device confirmed. If one did
// not, nothing is published, and every worker of the job is told to drop
// exactly those versions (DropArray with a version): the workers that did
// apply them must not keep, in memory or in their --state-dir, a version
// the index never had, or a rebuild after a coordinator restart could
// take it for the newest (docs/RELIABILITY.md). Once published, the
// workers that still keep blocks of the versions replaced elsewhere than
// beside the new ones are told to drop them before the job is answered,
// for the same reason.
//
// Thread-compatible: one per job.
#ifndef SHARDMAP_SERVER_RESIDENT_COMMIT_H_
#define SHARDMAP_SERVER_RESIDENT_COMMIT_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/job_results.h"
#include "server/planner.h"
#include "server/resident_index.h"
#include "server/shard_channel.h"
#include "server/worker_pool.h"

namespace shardmap {

class ResidentCommit {
 public:
  // Issues the versions `plan` writes. FAILED_PRECONDITION if it writes
  // resident arrays and `index` is null (a server that keeps none).
  // `plan` and `index` must outlive the commit.
  static absl::StatusOr<ResidentCommit> Begin(const JobPlan& plan,
                                              ResidentIndex* index);

  // True when the job writes resident arrays (and so is two-phase).
  bool two_phase() const { return two_phase_; }
  // Per output: the version it is stored as (0: returned).
  const std::vector<uint64_t>& output_versions() const {
    return output_versions_;
  }
  // Per state slot: the version written (0: read only).
  const std::vector<uint64_t>& state_versions() const {
    return state_versions_;
  }

  // Whether the stored outputs may replace the arrays of their names
  // (ResidentIndex::CheckWrite): known only once the devices said the
  // outputs' shapes. FAILED_PRECONDITION / INVALID_ARGUMENT as CheckWrite.
  absl::Status CheckOutputs(const std::vector<JobOutput>& outputs) const;

  // After the commit decision went out: `ended[d]` is device d's final
  // status. If every device confirmed, publishes the new versions in the
  // index, marks the stored outputs in `outputs`, and has `connector`
  // tell the workers that still keep blocks of the versions replaced
  // (ResidentIndex::Commit: former holders of an array the job placed on
  // other workers) to drop them, all at once, each call bounded by
  // `drop_timeout`; a worker that cannot be told is logged and the job
  // stays committed. Otherwise publishes
  // nothing, has `connector` tell each of `workers` (each call bounded by
  // `drop_timeout`, all at once) to drop the versions, and returns the
  // first unconfirmed device's error, annotated "job J is not committed:
  // DEVICE did not confirm its writes, so the resident arrays keep their
  // previous versions".
  absl::Status Publish(const std::string& job_id,
                       const std::vector<WorkerPool::Worker>& workers,
                       const std::vector<absl::Status>& ended,
                       std::vector<JobOutput>& outputs,
                       WorkerConnector& connector, absl::Duration drop_timeout);

  // After the job failed (`error`) once it went out to `workers`: each
  // array the workers may have consumed (a donated argument,
  // server/donation.h) is marked lost in the index at the version donated,
  // and every worker of the job is told to drop the name (each call
  // bounded by `drop_timeout`, all at once), so no worker serves it again.
  // Returns `error`, annotated with the arrays lost if there are any.
  absl::Status LoseDonations(const std::string& job_id,
                             const absl::Status& error,
                             const std::vector<WorkerPool::Worker>& workers,
                             WorkerConnector& connector,
                             absl::Duration drop_timeout) const;

 private:
  ResidentCommit(const JobPlan& plan, ResidentIndex* index)
      : plan_(&plan), index_(index) {}
  // Per worker address: (name, version) pairs to drop, version 0 for
  // every version of the name.
  using WorkerDrops =
      std::map<std::string, std::vector<std::pair<std::string, uint64_t>>>;

  // Tells every worker of the job to drop the versions written.
  void RollBack(const std::vector<WorkerPool::Worker>& workers,
                WorkerConnector& connector, absl::Duration timeout) const;
  // Has `connector` send each worker its drops (Worker.DropArray), all
  // workers at once, each call bounded by `deadline`; logs a drop that
  // fails, saying it was of blocks `what`.
  static void SendDrops(const WorkerDrops& drops, WorkerConnector& connector,
                        absl::Time deadline, const std::string& what);

  const JobPlan* plan_;
  ResidentIndex* index_;  // may be null when !two_phase_
  bool two_phase_ = false;
  std::vector<uint64_t> output_versions_;
  std::vector<uint64_t> state_versions_;
};

}  // namespace shardmap

#endif  // SHARDMAP_SERVER_RESIDENT_COMMIT_H_
