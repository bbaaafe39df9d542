#include "server/job_runner.h"

#include <algorithm>
#include <atomic>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status_util.h"
#include "server/device_fanout.h"
#include "server/output_assembly.h"
#include "server/resident_commit.h"
#include "server/shard_call.h"

namespace shardmap {
namespace {

// Jobs whose arguments that travel total at most this may run their device
// calls on the workers' long-lived links (server/shard_link.h): their few
// messages wait behind little on a shared stream.
constexpr uint64_t kSmallJobBytes = uint64_t{1} << 20;
// Jobs up to this many argument bytes run their calls serially
// (DeviceFanout::Options::serial).
constexpr uint64_t kSerialJobBytes = uint64_t{64} << 10;

// Counts a job as running for its scope.
class Running {
 public:
  explicit Running(std::atomic<int>* n) : n_(n), others_(n->fetch_add(1)) {}
  ~Running() { n_->fetch_sub(1); }
  int others() const { return others_; }

 private:
  std::atomic<int>* const n_;
  const int others_;
};

}  // namespace

std::vector<uint64_t> JobRunner::IssueTickets(
    const std::vector<WorkerPool::Worker>& workers) {
  // All of a job's tickets are issued under one lock, so every pair of
  // jobs is ordered the same way on every worker they share.
  absl::MutexLock lock(&tickets_mu_);
  std::vector<uint64_t> tickets;
  for (const WorkerPool::Worker& w : workers) {
    tickets.push_back(next_ticket_[w.id]++);
  }
  return tickets;
}

absl::StatusOr<std::vector<JobOutput>> JobRunner::Run(
    const std::string& job_id, const JobPlan& plan, std::vector<Tensor> inputs,
    const std::vector<WorkerPool::Worker>& workers, absl::Time deadline,
    const std::function<bool()>& cancelled) {
  ArrivingInputs whole(std::move(inputs));
  return Run(job_id, plan, whole, nullptr, workers, deadline, cancelled,
             nullptr);
}

absl::StatusOr<std::vector<JobOutput>> JobRunner::Run(
    const std::string& job_id, const JobPlan& plan, ArrivingInputs& inputs,
    const std::function<absl::Status()>& receive,
    const std::vector<WorkerPool::Worker>& workers, absl::Time deadline,
    const std::function<bool()>& cancelled, ResultSink* sink) {
  const Running running(&running_);
  SHARD_ASSIGN_OR_RETURN(ResidentCommit commit,
                         ResidentCommit::Begin(plan, index_));
  // Issued last, right before the headers go out (a header that carries
  // its device's arguments goes once the whole upload is in): every ticket
  // handed out is sent to its worker (unless the job is aborted meanwhile,
  // and then as a skip).
  const std::vector<uint64_t> tickets = IssueTickets(workers);
  std::atomic<uint64_t> returned_bytes{0};
  OutputBuffers buffers(plan, options_.max_job_bytes);
  const ShardCallContext context{&workers,
                                 &tickets,
                                 options_.collective_timeout,
                                 &commit.output_versions(),
                                 &commit.state_versions(),
                                 commit.two_phase(),
                                 epoch_,
                                 &returned_bytes,
                                 options_.max_job_bytes,
                                 deadline,
                                 &buffers};
  DeviceFanout::Options fanout_options;
  fanout_options.liveness_poll = options_.liveness_poll;
  fanout_options.check_live = options_.check_live;
  fanout_options.two_phase = commit.two_phase();
  // A small job's calls share the workers' links (server/shard_link.h):
  // each is then a message or two on a stream already open, and a worker
  // runs a tiny one on the thread that read it (worker/inline_call.h). A
  // lone job under `auto` takes them only if they are up, and otherwise
  // has them started for the jobs after it and opens streams of its own
  // meanwhile rather than wait for them; with other jobs running it waits.
  // A lone two-phase job keeps streams of its own: on links its decision
  // round trip now and then took 3 ms more (docs/DESIGN.md).
  const bool small = plan.input_bytes() <= kSmallJobBytes;
  bool links_up = small && options_.job_links != JobLinks::kNever;
  if (links_up) {
    // Asks every worker, none skipped: each link not up gets started.
    size_t up = 0;
    for (const WorkerPool::Worker& w : workers) {
      if (connector_->SmallReady(w.address, deadline)) ++up;
    }
    links_up = up == workers.size();
  }
  const bool lone_on_links = links_up && !commit.two_phase();
  fanout_options.small = small && (options_.job_links == JobLinks::kAlways ||
                                   (options_.job_links == JobLinks::kAuto &&
                                    (lone_on_links || running.others() > 0)));
  // A tiny one's calls run on this thread, one after another: its
  // arguments come first, all of them (a few messages at most), so that no
  // call waits for the client's bytes while the others wait for it.
  // Only on links already up, whose calls say when their answer is in.
  fanout_options.serial =
      fanout_options.small && plan.input_bytes() <= kSerialJobBytes && links_up;
  DeviceFanout fanout(fanout_options, &device_threads_, connector_, workers,
                      deadline);
  absl::Status received;
  if (fanout_options.serial && receive) received = receive();
  // The outputs' headers once they streamed (the buffers may still lend
  // bytes to gRPC, so the outcome holds no data); nullopt if they did not.
  absl::StatusOr<std::optional<std::vector<JobOutput>>> streamed = std::nullopt;
  DeviceFanout::Call call;
  call.send = [&](int64_t d, ShardChannel& ch) {
    return SendShardCall(job_id, plan, d, context, inputs, ch);
  };
  call.receive = [&](int64_t d, const absl::StatusOr<bool>& sent,
                     ShardChannel& ch) {
    absl::StatusOr<DeviceResult> r =
        sent.ok() ? ReceiveShardCall(plan, d, context, *sent, ch)
                  : absl::StatusOr<DeviceResult>(sent.status());
    // The job is over: a device still waiting for the client's bytes
    // need not wait for the rest of the upload.
    if (!r.ok()) {
      const absl::Status why = absl::CancelledError(absl::StrCat(
          "device ", d, " of the job failed: ", r.status().message()));
      inputs.Stop(why);
      buffers.Stop(why);
    } else {
      buffers.Finished(d);
    }
    return r;
  };
  fanout.Run(call, cancelled, [&](const std::function<void()>& watch) {
    if (receive && !fanout_options.serial) received = receive();
    if (received.ok() && sink != nullptr) {
      streamed =
          StreamOutputs(plan, workers, buffers, *sink, deadline,
                        OutputBuffers::Watch{options_.liveness_poll, watch});
    }
  });
  // A device that failed may never have received its header: its worker's
  // later jobs must not wait for its ticket.
  for (size_t d = 0; d < workers.size(); ++d) {
    if (fanout.results()[d].ok()) continue;
    skipper_.Skip(workers[d].address, TicketOwner(workers[d], epoch_),
                  tickets[d]);
  }
  inputs.Release();
  // The client's own error comes first: the devices' are its consequences.
  absl::Status failed = !received.ok()
                            ? received
                            : AttributeFailure(job_id, plan, workers,
                                               fanout.lost(), fanout.results());
  // Then the streaming's own (the checks', or the client's leaving).
  if (failed.ok()) failed = streamed.status();
  absl::StatusOr<std::vector<JobOutput>> outcome = std::vector<JobOutput>();
  if (!failed.ok()) {
    outcome = failed;
  } else if (streamed->has_value()) {
    outcome = **std::move(streamed);
  } else {
    outcome = AssembleOutputs(plan, workers, fanout.results(),
                              options_.max_job_bytes, &buffers);
  }
  // Stored outputs may not replace arrays of another shape without
  // overwrite; that is known only now.
  if (outcome.ok() && commit.two_phase()) {
    if (absl::Status s = commit.CheckOutputs(*outcome); !s.ok()) outcome = s;
  }
  const bool commit_now = commit.two_phase() && outcome.ok();
  const std::vector<absl::Status> ended = fanout.Finish(commit_now);
  if (!commit_now) {
    if (outcome.ok()) return outcome;
    return commit.LoseDonations(job_id, outcome.status(), workers, *connector_,
                                options_.drop_timeout);
  }
  if (absl::Status s = commit.Publish(job_id, workers, ended, *outcome,
                                      *connector_, options_.drop_timeout);
      !s.ok()) {
    return commit.LoseDonations(job_id, s, workers, *connector_,
                                options_.drop_timeout);
  }
  return outcome;
}

}  // namespace shardmap
