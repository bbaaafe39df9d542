#include "server/resident_commit.h"

#include <spdlog/spdlog.h>

#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "core/status_util.h"
#include "rpc/trace_context.h"
#include "server/donation.h"
#include "server/output_assembly.h"

namespace shardmap {

absl::StatusOr<ResidentCommit> ResidentCommit::Begin(const JobPlan& plan,
                                                     ResidentIndex* index) {
  ResidentCommit c(plan, index);
  c.two_phase_ = plan.writes_residents();
  if (c.two_phase_ && index == nullptr) {
    return absl::FailedPreconditionError(
        "this server keeps no resident arrays");
  }
  c.output_versions_.assign(plan.resident_outputs.size(), 0);
  c.state_versions_.assign(plan.states.size(), 0);
  for (size_t o = 0; o < c.output_versions_.size(); ++o) {
    if (!plan.StoredAs(o).empty()) c.output_versions_[o] = index->NextVersion();
  }
  for (size_t i = 0; i < plan.states.size(); ++i) {
    if (plan.states[i].write) c.state_versions_[i] = index->NextVersion();
  }
  return c;
}

absl::Status ResidentCommit::CheckOutputs(
    const std::vector<JobOutput>& outputs) const {
  const JobPlan& plan = *plan_;
  for (size_t o = 0; o < plan.resident_outputs.size(); ++o) {
    if (plan.StoredAs(o).empty()) continue;
    SHARD_RETURN_IF_ERROR(index_->CheckWrite(plan.StoredAs(o), outputs[o].meta,
                                             plan.mesh, plan.out_specs[o],
                                             plan.overwrite));
  }
  return absl::OkStatus();
}

absl::Status ResidentCommit::Publish(
    const std::string& job_id, const std::vector<WorkerPool::Worker>& workers,
    const std::vector<absl::Status>& ended, std::vector<JobOutput>& outputs,
    WorkerConnector& connector, absl::Duration drop_timeout) {
  const JobPlan& plan = *plan_;
  for (size_t d = 0; d < ended.size(); ++d) {
    if (ended[d].ok()) continue;
    // Nothing is published: the arrays keep their previous versions,
    // which every worker still holds, and the workers that applied the
    // new ones drop them again.
    RollBack(workers, connector, drop_timeout);
    return Annotate(
        ended[d],
        absl::StrCat("job ", job_id,
                     " is not committed: ", DeviceName(plan, d, workers[d]),
                     " did not confirm its writes, so the resident arrays "
                     "keep their previous versions"));
  }
  // The workers hold the new versions: publish them.
  std::vector<std::string> ids, addresses;
  for (const auto& w : workers) {
    ids.push_back(w.id);
    addresses.push_back(w.address);
  }
  // Where blocks of the versions replaced are still kept (by address).
  WorkerDrops superseded;
  auto publish = [&](ResidentArray a) {
    const std::string name = a.name;
    for (const ResidentIndex::Superseded& old : index_->Commit(std::move(a))) {
      superseded[old.address].emplace_back(name, old.version);
    }
  };
  for (size_t o = 0; o < plan.resident_outputs.size(); ++o) {
    if (plan.StoredAs(o).empty()) continue;
    ResidentArray a;
    a.name = plan.StoredAs(o);
    a.meta = outputs[o].meta;
    a.mesh = plan.mesh;
    a.spec = plan.out_specs[o];
    a.worker_ids = ids;
    a.addresses = addresses;
    a.version = output_versions_[o];
    publish(std::move(a));
    outputs[o].stored_as = plan.StoredAs(o);
  }
  for (size_t i = 0; i < plan.states.size(); ++i) {
    const StatePlan& st = plan.states[i];
    if (!st.write) continue;
    ResidentArray a = st.array;
    a.mesh = plan.mesh;
    a.spec = st.stored_spec();
    a.worker_ids = ids;
    a.addresses = addresses;
    a.version = state_versions_[i];
    publish(std::move(a));
  }
  // Before the job is answered: a worker keeps its blocks until told, and
  // a rebuild after a coordinator restart could otherwise serve such an
  // older version if its holders report before the new version's
  // (ResidentIndex::Commit). A worker that cannot be told keeps them; the
  // write stays committed.
  SendDrops(superseded, connector, absl::Now() + drop_timeout,
            "that a newer version replaced");
  return absl::OkStatus();
}

void ResidentCommit::RollBack(const std::vector<WorkerPool::Worker>& workers,
                              WorkerConnector& connector,
                              absl::Duration timeout) const {
  const JobPlan& plan = *plan_;
  std::vector<std::pair<std::string, uint64_t>> written;
  for (size_t o = 0; o < output_versions_.size(); ++o) {
    if (output_versions_[o] != 0) {
      written.emplace_back(plan.StoredAs(o), output_versions_[o]);
    }
  }
  for (size_t i = 0; i < state_versions_.size(); ++i) {
    if (state_versions_[i] != 0) {
      written.emplace_back(plan.states[i].array.name, state_versions_[i]);
    }
  }
  // Every worker of the job, whether it confirmed or not: one whose answer
  // was lost may have applied the writes all the same. A worker that does
  // not hold a version ignores the drop.
  WorkerDrops drops;
  for (const WorkerPool::Worker& w : workers) drops[w.address] = written;
  // A failure is harmless unless the coordinator restarts before the
  // worker's next write of the name: the index rebuild then prefers the
  // newest version complete on every device.
  SendDrops(drops, connector, absl::Now() + timeout,
            "of a job that was not committed");
}

absl::Status ResidentCommit::LoseDonations(
    const std::string& job_id, const absl::Status& error,
    const std::vector<WorkerPool::Worker>& workers, WorkerConnector& connector,
    absl::Duration drop_timeout) const {
  std::vector<std::pair<std::string, uint64_t>> lost;
  for (const ArgPlan& a : plan_->args) {
    if (!a.donated || !DonationApplies(*a.resident, workers)) continue;
    lost.emplace_back(a.resident->name, a.resident->version);
  }
  if (lost.empty() || index_ == nullptr) return error;
  std::vector<std::string> names;
  for (const auto& [name, version] : lost) {
    index_->MarkLost(
        name, version,
        absl::StrCat("it was donated to ", job_id, " at version ", version,
                     ", which failed after the workers may have consumed it"));
    names.push_back(absl::StrCat("'", name, "' (version ", version, ")"));
  }
  // Every version (0) of each name: a worker that took its block out of
  // memory still has it in its --state-dir, which only this removes.
  WorkerDrops drops;
  for (const WorkerPool::Worker& w : workers) {
    for (const auto& [name, version] : lost) {
      drops[w.address].emplace_back(name, 0);
    }
  }
  SendDrops(drops, connector, absl::Now() + drop_timeout,
            "donated to a job that failed");
  return absl::Status(
      error.code(),
      absl::StrCat(error.message(), "; the job's donated argument",
                   names.size() > 1 ? "s " : " ", absl::StrJoin(names, ", "),
                   names.size() > 1 ? " are" : " is", " lost: put or restore ",
                   names.size() > 1 ? "them" : "it", " again"));
}

void ResidentCommit::SendDrops(const WorkerDrops& drops,
                               WorkerConnector& connector, absl::Time deadline,
                               const std::string& what) {
  const LogContext log_context = CurrentLogContext();
  std::vector<std::thread> calls;
  for (const auto& [address, blocks] : drops) {
    calls.emplace_back([&, address = address, blocks = &blocks] {
      ScopedLogContext in_thread(log_context);
      for (const auto& [name, version] : *blocks) {
        absl::Status s =
            connector.DropVersion(address, name, version, deadline);
        if (!s.ok()) {
          spdlog::warn("could not tell worker {} to drop '{}' {} {}: {}",
                       address, name,
                       version == 0 ? std::string("(every version)")
                                    : absl::StrCat("version ", version),
                       what, std::string(s.message()));
        }
      }
    });
  }
  for (std::thread& t : calls) t.join();
}

}  // namespace shardmap
