#include "server/run_job_call.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "rpc/grpc_status.h"
#include "rpc/raw_stream_adapter.h"
#include "rpc/trace_context.h"

namespace shardmap {
namespace {

// The RunJob call as JobService reads and writes it.
using JobStreamAdapter =
    RawStreamAdapter<JobStream, v1::RunJobRequest, v1::RunJobResponse>;

}  // namespace

absl::Time CallDeadline(const grpc::ServerContextBase& context,
                        absl::Time start, absl::Duration max_job_time) {
  return std::min(start + max_job_time, absl::FromChrono(context.deadline()));
}

RunJobCall::RunJobCall(const Services& services,
                       grpc::CallbackServerContext* context)
    : services_(services), context_(context) {}

RunJobCall* RunJobCall::Start(const Services& services,
                              grpc::CallbackServerContext* context) {
  // gRPC binds the call to this reactor only once Start returns, so none of
  // its reactions (OnReadDone, OnCancel, OnDone) runs before; so the job,
  // which starts from OnReadDone once admitted, does not start before.
  auto* c = new RunJobCall(services, context);
  JobCall& call = c->call_;
  call.start = absl::Now();
  call.deadline = CallDeadline(*context, call.start, services.max_job_time);
  const Traceparent span = ServerSpan(*context);
  call.trace_id = span.trace_id;
  call.span_id = span.span_id;
  // The workers' streams end at the deadline and the job fails with
  // DEADLINE_EXCEEDED. The watchdog, a little later, cancels the call to end
  // a read or write that waits on a stalled client (a cancelled call cannot
  // report its status). TryCancel runs none of the call's reactions on the
  // watchdog's thread: gRPC schedules them.
  c->watch_ = services.watchdog->Start(call.deadline + kStreamWaitMargin / 2,
                                       [context] { context->TryCancel(); });
  c->SetWaitLimit(call.deadline + kStreamWaitMargin);
  if (services.gate != nullptr) {
    auto entered = services.gate->Enter(context);
    if (!entered.ok()) {
      c->Refuse(entered.status());
      return c;
    }
    c->pass_ = *std::move(entered);
  }
  absl::StatusOr<uint64_t> ticket = services.admission->Submit(
      [c] {
        c->started_ = true;
        // The job's thread starts with the call's first message (or its
        // end), not before, so it does not wait for it: a small job's
        // messages are then all in, and its thread reads them at once.
        c->CallWhenReadable(
            [c] { c->services_.threads->Run([c] { c->Run(); }); });
      },
      [c](absl::Status why) { c->Refuse(std::move(why)); });
  if (!ticket.ok()) {
    c->Refuse(ticket.status());
    return c;
  }
  c->ticket_ = static_cast<int64_t>(*ticket);
  if (c->started_) return c;  // most jobs: no turn to wait for
  // If it still waits at its deadline, it ends then, saying so. On the
  // watchdog's thread, under its lock: a refusal is quick (a log line, a
  // counter, Finish, which runs no reaction here), and a thread per refusal
  // would let a crowd of expiring calls start as many threads.
  c->queue_watch_ = services.watchdog->Start(call.deadline, [c] {
    if (!c->LeaveQueue()) return;
    c->Refuse(absl::DeadlineExceededError(absl::StrCat(
        "the job never started: it waited ",
        absl::FormatDuration(absl::Now() - c->call_.start),
        " for a turn behind ", c->services_.admission->running(),
        " running jobs (the coordinator's --max-concurrent-jobs) until its "
        "deadline")));
  });
  return c;
}

bool RunJobCall::LeaveQueue() {
  const int64_t ticket = ticket_.load();
  return ticket >= 0 &&
         services_.admission->Withdraw(static_cast<uint64_t>(ticket));
}

void RunJobCall::Run() {
  JobStreamAdapter stream(context_, this, this);
  const absl::Status s = services_.jobs->Run(call_, &stream);
  services_.admission->Done();
  FinishWhenWritten(ToGrpcStatus(s));
}

void RunJobCall::Refuse(absl::Status why) {
  call_.refused = std::move(why);
  JobStreamAdapter stream(context_, this, this);
  FinishWhenWritten(ToGrpcStatus(services_.jobs->Run(call_, &stream)));
}

void RunJobCall::OnCancel() {
  BlockingServerStream::OnCancel();
  // Running, it sees the cancel; refused, it ends by itself.
  if (!LeaveQueue()) return;
  Refuse(absl::CancelledError(absl::StrCat(
      "the job never started: its call ended (cancelled by its client, or "
      "its deadline passed) while it waited for a turn behind ",
      services_.admission->running(), " running jobs")));
}

}  // namespace shardmap
