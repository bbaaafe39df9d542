#include "server/job_runner.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <cstring>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "core/block_math.h"
#include "core/status_util.h"
#include "rpc/trace_context.h"
#include "server/replication_check.h"
#include "wire/chunking.h"
#include "wire/proto_convert.h"

namespace shardmap {

// What one device sent back.
struct DeviceResult {
  std::vector<ArrayMeta> outputs;
  DeviceDigests digests;
  std::vector<std::optional<Tensor>> blocks;  // only representatives'
};

namespace {

// Shared by the device threads of one job: the first failure cancels the
// other devices' streams.
class JobAbort {
 public:
  explicit JobAbort(size_t devices) : channels_(devices, nullptr) {}
  void Attach(size_t device, ShardChannel* ch) {
    absl::MutexLock lock(&mu_);
    channels_[device] = ch;
    if (aborted_) ch->Cancel();
  }
  void Detach(size_t device) {
    absl::MutexLock lock(&mu_);
    channels_[device] = nullptr;
  }
  void Abort() {
    absl::MutexLock lock(&mu_);
    aborted_ = true;
    for (ShardChannel* ch : channels_) {
      if (ch != nullptr) ch->Cancel();
    }
  }

 private:
  absl::Mutex mu_;
  bool aborted_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<ShardChannel*> channels_ ABSL_GUARDED_BY(mu_);
};

std::string DeviceName(const JobPlan& plan, int64_t d,
                       const WorkerPool::Worker& w) {
  return absl::StrCat("device ", d, " (mesh coordinates ",
                      ShapeTuple(plan.mesh.Coords(d)), ", worker ", w.id,
                      " at ", w.address, ")");
}

absl::Status DescribeFailure(const absl::Status& s, const std::string& device) {
  switch (s.code()) {
    case absl::StatusCode::kUnavailable:
      return absl::UnavailableError(
          absl::StrCat(device, " is unavailable: ", s.message()));
    case absl::StatusCode::kDeadlineExceeded:
      return absl::DeadlineExceededError(
          absl::StrCat("timed out waiting for ", device, ": ", s.message()));
    default:
      return Annotate(s, device);
  }
}

// Ends a stream we no longer trust; our own error is the one to report.
absl::Status Abandon(ShardChannel& ch, absl::Status why) {
  ch.Cancel();
  static_cast<void>(ch.Finish());
  return why;
}

// What every device's ShardJob shares, and what differs per device.
struct JobHeader {
  const std::vector<WorkerPool::Worker>* workers;
  const std::vector<uint64_t>* tickets;
  absl::Duration collective_timeout;
  const std::vector<uint64_t>* output_versions;  // per output
  const std::vector<uint64_t>* state_versions;   // per state
  bool two_phase;
  uint64_t epoch;  // this coordinator's start
  // Returned output bytes received so far, by all devices; with the
  // job's argument bytes they must stay under max_job_bytes.
  std::atomic<uint64_t>* returned_bytes;
  uint64_t max_job_bytes;
};

v1::ResidentSource SourceOf(const ResidentArray& a,
                            const PartitionSpec& job_spec) {
  v1::ResidentSource src;
  src.set_name(a.name);
  src.set_version(a.version);
  *src.mutable_header() = HeaderToProto(a.meta.dtype, a.meta.shape);
  *src.mutable_mesh() = MeshToProto(a.mesh);
  *src.mutable_spec() = SpecToProto(a.spec);
  for (const std::string& address : a.addresses) src.add_holders(address);
  *src.mutable_job_spec() = SpecToProto(job_spec);
  return src;
}

// The id a worker's tickets count under (ShardJob.worker_id). Tickets
// count per (worker, coordinator start): a restarted coordinator numbers
// its workers from w0 again, and its tickets from 0.
std::string TicketOwner(const WorkerPool::Worker& w, uint64_t epoch) {
  return absl::StrCat(w.id, "@", epoch);
}

absl::StatusOr<DeviceResult> RunDevice(const std::string& job_id,
                                       const JobPlan& plan, int64_t d,
                                       const JobHeader& common,
                                       const std::vector<Tensor>& inputs,
                                       ShardChannel& ch) {
  v1::ShardRequest request;
  v1::ShardJob* job = request.mutable_job();
  for (const WorkerPool::Worker& w : *common.workers) {
    job->add_device_addresses(w.address);
    job->add_device_incarnations(w.incarnation);
  }
  job->set_ticket((*common.tickets)[d]);
  job->set_worker_id(TicketOwner((*common.workers)[d], common.epoch));
  job->set_collective_timeout_ms(
      absl::ToInt64Milliseconds(common.collective_timeout));
  // Workers drop late peer frames of jobs they finished by this id, so it
  // must not repeat across coordinator starts (job-0 comes again).
  job->set_job_id(absl::StrCat(job_id, "@", common.epoch));
  job->set_function(plan.function.name());
  *job->mutable_mesh() = MeshToProto(plan.mesh);
  job->set_device_id(d);
  job->set_kwargs_json(plan.kwargs_json);
  for (const ArgPlan& a : plan.args) {
    *job->add_args() = HeaderToProto(a.meta.dtype, a.layout.block_shape());
  }
  const int num_outputs = static_cast<int>(plan.out_specs.size());
  for (int o = 0; o < num_outputs; ++o) {
    job->add_send_outputs(plan.StoredAs(o).empty() &&
                          plan.IsOutputRepresentative(o, d));
  }
  for (const ArgPlan& a : plan.args) {
    *job->add_resident_args() = a.resident.has_value()
                                    ? SourceOf(*a.resident, a.spec)
                                    : v1::ResidentSource();
  }
  for (int o = 0; o < static_cast<int>(plan.resident_outputs.size()); ++o) {
    v1::ResidentTarget* t = job->add_resident_outputs();
    if (plan.StoredAs(o).empty()) continue;
    t->set_name(plan.StoredAs(o));
    t->set_version((*common.output_versions)[o]);
    *t->mutable_spec() = SpecToProto(plan.out_specs[o]);
  }
  for (size_t i = 0; i < plan.states.size(); ++i) {
    const StatePlan& st = plan.states[i];
    v1::StateSlot* slot = job->add_states();
    slot->set_slot(st.slot);
    *slot->mutable_source() = SourceOf(st.array, st.spec);
    slot->set_write(st.write);
    slot->set_write_version((*common.state_versions)[i]);
  }
  job->set_two_phase(common.two_phase);
  bool ok = ch.Write(request);
  for (size_t i = 0; ok && i < plan.args.size(); ++i) {
    const ArgPlan& a = plan.args[i];
    if (a.resident.has_value()) continue;  // the worker fetches it
    BlockRegion region(a.layout.global_shape(), a.layout.block_shape(),
                       a.layout.BlockOrigin(d), ItemSize(a.meta.dtype));
    const uint8_t* base = inputs[i].data();
    ok = SendChunks(
        static_cast<uint32_t>(i), region.num_bytes(),
        [&](size_t offset, size_t length, uint8_t* dst) {
          region.CopyOut(base, offset, length, dst);
        },
        [&](v1::ArrayChunk&& chunk) {
          v1::ShardRequest r;
          *r.mutable_chunk() = std::move(chunk);
          return ch.Write(r);
        });
  }
  // A two-phase job keeps its stream open for the commit decision.
  if (ok && !common.two_phase) ch.WritesDone();

  DeviceResult result;
  v1::ShardResponse response;
  if (ok && ch.Read(&response)) {
    if (!response.has_outputs()) {
      return Abandon(ch, absl::InternalError(absl::StrCat(
                             "worker answered ", plan.function.name(),
                             " without ShardOutputs")));
    }
    absl::StatusOr<DeviceDigests> digests =
        DigestsFromProto(plan, response.outputs());
    if (!digests.ok()) return Abandon(ch, digests.status());
    result.digests = *std::move(digests);
    std::vector<size_t> sizes;
    std::vector<ChunkSequencer::Sink> sinks;
    for (int o = 0; o < num_outputs; ++o) {
      auto meta = HeaderFromProto(response.outputs().outputs(o),
                                  absl::StrCat("output ", o));
      if (!meta.ok()) return Abandon(ch, meta.status());
      result.outputs.push_back(*meta);
      if (plan.StoredAs(o).empty() && plan.IsOutputRepresentative(o, d)) {
        const uint64_t returned =
            common.returned_bytes->fetch_add(meta->num_bytes()) +
            meta->num_bytes();
        if (plan.input_bytes() + returned > common.max_job_bytes) {
          return Abandon(
              ch, absl::ResourceExhaustedError(absl::StrCat(
                      "the job's arguments (", plan.input_bytes(),
                      " bytes) and the outputs it returns (at least ", returned,
                      " bytes) are over the coordinator's "
                      "--max-job-bytes of ",
                      common.max_job_bytes,
                      " bytes; store large outputs as resident arrays "
                      "(--out @NAME) instead")));
        }
        auto t = Tensor::Create(meta->dtype, meta->shape);
        if (!t.ok()) return Abandon(ch, t.status());
        result.blocks.emplace_back(*std::move(t));
        sizes.push_back(meta->num_bytes());
        sinks.push_back(ChunkSequencer::Into(*result.blocks.back()));
      } else {
        result.blocks.emplace_back(std::nullopt);
        sizes.push_back(0);
        sinks.push_back(nullptr);
      }
    }
    ChunkSequencer sequencer(std::move(sizes), std::move(sinks), "output");
    while (!sequencer.done() && ch.Read(&response)) {
      absl::Status s =
          response.has_chunk()
              ? sequencer.Accept(response.chunk())
              : absl::InternalError("unexpected message after outputs");
      if (!s.ok()) return Abandon(ch, s);
    }
    if (!sequencer.done()) {
      SHARD_RETURN_IF_ERROR(ch.Finish());
      SHARD_RETURN_IF_ERROR(sequencer.Finish());
    }
    if (common.two_phase) return result;  // Decide() ends the stream.
    while (ch.Read(&response)) {
    }
    SHARD_RETURN_IF_ERROR(ch.Finish());
    return result;
  }
  absl::Status s = ch.Finish();
  if (s.ok())
    s = absl::InternalError("worker closed the stream without outputs");
  return s;
}

// Sends a two-phase job's decision and ends its stream.
absl::Status Decide(ShardChannel& ch, bool commit) {
  v1::ShardRequest decision;
  decision.mutable_decision()->set_commit(commit);
  ch.Write(decision);
  ch.WritesDone();
  v1::ShardResponse ignored;
  while (ch.Read(&ignored)) {
  }
  return ch.Finish();
}

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
  const int64_t n = plan.mesh.num_devices();
  std::vector<absl::StatusOr<DeviceResult>> results;
  for (int64_t d = 0; d < n; ++d) {
    results.emplace_back(absl::UnknownError("not run"));
  }
  std::vector<uint64_t> output_versions(plan.resident_outputs.size(), 0);
  std::vector<uint64_t> state_versions(plan.states.size(), 0);
  const bool two_phase = plan.writes_residents();
  if (two_phase && index_ == nullptr) {
    return absl::FailedPreconditionError(
        "this server keeps no resident arrays");
  }
  for (size_t o = 0; o < output_versions.size(); ++o) {
    if (!plan.StoredAs(o).empty()) output_versions[o] = index_->NextVersion();
  }
  for (size_t i = 0; i < plan.states.size(); ++i) {
    if (plan.states[i].write) state_versions[i] = index_->NextVersion();
  }
  // Issued last, right before the headers go out: every ticket handed out
  // is sent to its worker (unless the job is aborted meanwhile).
  const std::vector<uint64_t> tickets = IssueTickets(workers);
  std::atomic<uint64_t> returned_bytes{0};
  const JobHeader header{
      &workers,         &tickets,        options_.collective_timeout,
      &output_versions, &state_versions, two_phase,
      epoch_,           &returned_bytes, options_.max_job_bytes};
  JobAbort abort(n);
  // Set by this thread when a worker stops being live mid-job.
  std::vector<absl::Status> lost(n);
  // A two-phase job's device threads wait here for the decision.
  absl::Notification decided;
  bool commit = false;  // written before `decided` is notified
  std::vector<absl::Status> ended(n);
  std::vector<std::thread> threads;
  {
    absl::Mutex done_mu;
    int64_t done = 0;
    std::vector<bool> finished(n, false);
    const LogContext log_context = CurrentLogContext();
    for (int64_t d = 0; d < n; ++d) {
      threads.emplace_back([&, d] {
        ScopedLogContext in_thread(log_context);  // logs and traceparent
        std::unique_ptr<ShardChannel> ch =
            connector_->Open(workers[d].address, deadline);
        abort.Attach(d, ch.get());
        results[d] = RunDevice(job_id, plan, d, header, inputs, *ch);
        if (!results[d].ok()) abort.Abort();
        {
          absl::MutexLock lock(&done_mu);
          ++done;
          finished[d] = true;
        }
        if (two_phase && results[d].ok()) {
          decided.WaitForNotification();
          ended[d] = Decide(*ch, commit);
        }
        abort.Detach(d);
      });
    }
    auto all_done = [&]() ABSL_SHARED_LOCKS_REQUIRED(done_mu) {
      return done == n;
    };
    done_mu.Lock();
    while (!done_mu.AwaitWithTimeout(absl::Condition(&all_done),
                                     options_.liveness_poll)) {
      const std::vector<bool> running_done = finished;
      done_mu.Unlock();
      if (cancelled && cancelled()) abort.Abort();  // the client left
      for (int64_t d = 0; options_.check_live && d < n; ++d) {
        if (!lost[d].ok() || running_done[d]) continue;
        lost[d] = options_.check_live(workers[d]);
        if (!lost[d].ok()) abort.Abort();
      }
      done_mu.Lock();
    }
    done_mu.Unlock();
  }
  // A device that failed may never have received its header: its worker's
  // later jobs must not wait for its ticket.
  for (int64_t d = 0; d < n; ++d) {
    if (results[d].ok()) continue;
    skipper_.Skip(workers[d].address, TicketOwner(workers[d], epoch_),
                  tickets[d]);
  }
  inputs.clear();
  absl::StatusOr<std::vector<JobOutput>> outcome =
      Collect(job_id, plan, workers, lost, results);
  // Stored outputs may not replace arrays of another shape without
  // overwrite; that is known only now.
  for (size_t o = 0; outcome.ok() && o < plan.resident_outputs.size(); ++o) {
    if (plan.StoredAs(o).empty()) continue;
    absl::Status s =
        index_->CheckWrite(plan.StoredAs(o), (*outcome)[o].meta, plan.mesh,
                           plan.out_specs[o], plan.overwrite);
    if (!s.ok()) outcome = s;
  }
  commit = two_phase && outcome.ok();
  decided.Notify();
  for (std::thread& t : threads) t.join();
  if (!commit) return outcome;
  for (int64_t d = 0; d < n; ++d) {
    if (!ended[d].ok()) {
      // Nothing is published: the arrays keep their previous versions,
      // which every worker still holds. (Workers that did confirm keep the
      // unpublished version too until the next write replaces it.)
      return Annotate(
          ended[d],
          absl::StrCat("job ", job_id, " is not committed: ",
                       DeviceName(plan, d, workers[d]),
                       " did not confirm its writes, so the resident arrays "
                       "keep their previous versions"));
    }
  }
  // The workers hold the new versions: publish them.
  std::vector<std::string> ids, addresses;
  for (const auto& w : workers) {
    ids.push_back(w.id);
    addresses.push_back(w.address);
  }
  for (size_t o = 0; o < plan.resident_outputs.size(); ++o) {
    if (plan.StoredAs(o).empty()) continue;
    ResidentArray a;
    a.name = plan.StoredAs(o);
    a.meta = (*outcome)[o].meta;
    a.mesh = plan.mesh;
    a.spec = plan.out_specs[o];
    a.worker_ids = ids;
    a.addresses = addresses;
    a.version = output_versions[o];
    index_->Commit(std::move(a));
    (*outcome)[o].stored_as = plan.StoredAs(o);
  }
  for (size_t i = 0; i < plan.states.size(); ++i) {
    const StatePlan& st = plan.states[i];
    if (!st.write) continue;
    ResidentArray a = st.array;
    a.mesh = plan.mesh;
    a.spec = st.spec.unsplit() ? PartitionSpec() : st.spec;
    a.worker_ids = ids;
    a.addresses = addresses;
    a.version = state_versions[i];
    index_->Commit(std::move(a));
  }
  return outcome;
}

absl::StatusOr<std::vector<JobOutput>> JobRunner::Collect(
    const std::string& job_id, const JobPlan& plan,
    const std::vector<WorkerPool::Worker>& workers,
    const std::vector<absl::Status>& lost,
    std::vector<absl::StatusOr<DeviceResult>>& results) {
  const int64_t n = plan.mesh.num_devices();
  for (int64_t d = 0; d < n; ++d) {
    if (!lost[d].ok()) {
      results[d] = absl::UnavailableError(
          absl::StrCat(lost[d].message(), "; it was running ",
                       plan.function.name(), " for job ", job_id));
    }
  }
  // Report the root cause: a device's own error, not the CANCELLED its
  // failure caused on the others.
  std::optional<absl::Status> first;
  int64_t first_device = -1;
  for (int64_t d = 0; d < n; ++d) {
    if (results[d].ok()) continue;
    const absl::Status s =
        DescribeFailure(results[d].status(), DeviceName(plan, d, workers[d]));
    if (!first.has_value() || (first->code() == absl::StatusCode::kCancelled &&
                               s.code() != absl::StatusCode::kCancelled)) {
      first = s;
      first_device = d;
    }
  }
  if (first.has_value()) {
    // A lost worker's own stream says only that it is gone; a peer that was
    // waiting on it in a collective says where. Report both.
    if (first->code() == absl::StatusCode::kUnavailable) {
      for (int64_t d = 0; d < n; ++d) {
        if (d == first_device || results[d].ok() ||
            results[d].status().code() == absl::StatusCode::kCancelled) {
          continue;
        }
        return absl::UnavailableError(
            absl::StrCat(first->message(), "; device ", d,
                         " saw: ", results[d].status().message()));
      }
    }
    return *first;
  }

  const std::string fn = plan.function.name();
  std::vector<BlockLayout> layouts;
  for (size_t o = 0; o < plan.out_specs.size(); ++o) {
    const ArrayMeta& meta0 = results[0]->outputs[o];
    for (int64_t d = 1; d < n; ++d) {
      const ArrayMeta& m = results[d]->outputs[o];
      if (m.dtype != meta0.dtype || m.shape != meta0.shape) {
        return absl::InvalidArgumentError(absl::StrCat(
            fn, " output ", o, " has block ",
            ShapeString(meta0.dtype, meta0.shape), " on device 0 but ",
            ShapeString(m.dtype, m.shape), " on device ", d,
            "; every device must return blocks of one shape and dtype"));
      }
    }
    const std::string what = plan.out_specs.size() == 1
                                 ? "out_specs"
                                 : absl::StrCat("out_specs[", o, "]");
    SHARD_ASSIGN_OR_RETURN(
        BlockLayout layout,
        BlockLayout::FromBlockShape(
            plan.mesh, plan.out_specs[o], meta0.shape, what,
            absl::StrCat(fn, " output ", o, " (",
                         ShapeString(meta0.dtype, meta0.shape), ")")));
    layouts.push_back(std::move(layout));
  }
  std::vector<const DeviceDigests*> digests;
  for (int64_t d = 0; d < n; ++d) digests.push_back(&results[d]->digests);
  SHARD_RETURN_IF_ERROR(CheckReplication(plan, digests, [&](int64_t d) {
    return DeviceName(plan, d, workers[d]);
  }));

  std::vector<JobOutput> outputs;
  for (size_t o = 0; o < plan.out_specs.size(); ++o) {
    const BlockLayout& layout = layouts[o];
    const DType dtype = results[0]->outputs[o].dtype;
    JobOutput result;
    result.meta = ArrayMeta{dtype, layout.global_shape()};
    if (!plan.StoredAs(o).empty()) {
      outputs.push_back(std::move(result));  // stays on the workers
      continue;
    }
    SHARD_ASSIGN_OR_RETURN(
        Tensor out,
        Tensor::Create(dtype, layout.global_shape(), options_.max_job_bytes));
    for (int64_t d = 0; d < n; ++d) {
      if (!plan.IsOutputRepresentative(o, d)) continue;
      std::optional<Tensor>& block = results[d]->blocks[o];
      BlockRegion region(layout.global_shape(), layout.block_shape(),
                         layout.BlockOrigin(d), ItemSize(dtype));
      region.CopyIn(block->data(), 0, region.num_bytes(), out.data());
      block.reset();
    }
    result.data = std::move(out);
    outputs.push_back(std::move(result));
  }
  return outputs;
}

}  // namespace shardmap
