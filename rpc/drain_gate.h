// The SIGTERM drain of a server's long calls (RunJob on the coordinator,
// RunShard on workers): once draining, new calls are refused with
// UNAVAILABLE; the calls in flight may finish until the grace deadline,
// after which they are cancelled.
//
//   auto pass = gate.Enter(context);      // first thing in the handler
//   if (!pass.ok()) return ToGrpcStatus(pass.status());
//   ...                                   // the call; *pass leaves on exit
//
//   gate.Drain(grace);                    // main, on SIGTERM
//
// Thread-safe.
#ifndef SHARDMAP_CORE_DRAIN_GATE_H_
#define SHARDMAP_CORE_DRAIN_GATE_H_

#include <grpcpp/server_context.h>

#include <atomic>
#include <memory>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace shardmap {

class DrainGate {
 public:
  // Held by a call in flight; leaving is the destructor.
  class Pass {
   public:
    ~Pass();
    Pass(const Pass&) = delete;
    Pass& operator=(const Pass&) = delete;

   private:
    friend class DrainGate;
    Pass(DrainGate* gate, grpc::ServerContextBase* context)
        : gate_(gate), context_(context) {}
    DrainGate* const gate_;
    grpc::ServerContextBase* const context_;
  };

  // `what` names the server in the refusal ("the coordinator").
  explicit DrainGate(std::string what) : what_(std::move(what)) {}

  // UNAVAILABLE once draining. `context` may be null (then CancelCalls
  // cannot cancel the call, only report it as cancelled()).
  absl::StatusOr<std::unique_ptr<Pass>> Enter(grpc::ServerContextBase* context);

  // The whole drain: StartDrain, wait up to `grace` for the calls in
  // flight; then Cancel, give them `settle` to end with their own error,
  // CancelCalls, and wait `settle` again. Returns how many calls were
  // still in flight when the grace ended (0: all finished).
  int64_t Drain(absl::Duration grace, absl::Duration settle = absl::Seconds(2));

  void StartDrain();
  // Waits until no call is in flight; false if `deadline` came first.
  bool WaitIdle(absl::Time deadline);
  // Makes cancelled() true, for work that polls it (the coordinator's
  // running jobs) and can fail with a clear error.
  void Cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_.load(); }
  // Cancels every call in flight (TryCancel on its context).
  void CancelCalls();
  int64_t in_flight() const;

 private:
  void Leave(grpc::ServerContextBase* context);

  const std::string what_;
  std::atomic<bool> draining_{false};
  std::atomic<bool> cancelled_{false};
  mutable absl::Mutex mu_;
  int64_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  std::multiset<grpc::ServerContextBase*> contexts_ ABSL_GUARDED_BY(mu_);
};

}  // namespace shardmap

#endif  // SHARDMAP_CORE_DRAIN_GATE_H_
