// The worker's end of a job link (Worker.RunShards, on gRPC's callback
// API): the coordinator's long-lived stream carrying many RunShard calls
// at once. Each call becomes a ShardStream that the worker's job code runs
// exactly as it runs a RunShard stream, on a thread of a shared pool; its
// responses go back tagged with its number, the last with its status.
//
// A call whose first message ends its half and which `runs_inline` accepts
// (worker/inline_call.h) runs on the thread that read it instead, before
// the link reads on.
//
// The link's first message says the worker serves links (call 0). A call
// is cancelled when the coordinator says so, when its deadline passes,
// when the worker drains (`gate`), or when the link ends; the stream is
// finished once the coordinator has stopped sending and every call has
// ended, so every call thread is done before the reactor goes.
//
// Thread-safe; owns itself (deleted when gRPC is done with the stream).
#ifndef SHARDMAP_WORKER_SHARD_LINK_SERVICE_H_
#define SHARDMAP_WORKER_SHARD_LINK_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/device_threads.h"
#include "rpc/drain_gate.h"
#include "rpc/stream_mux.h"
#include "shardmap/v1/worker.pb.h"
#include "worker/shard_stream.h"

namespace shardmap {

class ShardLinkReactor final
    : public grpc::ServerBidiReactor<v1::ShardLinkRequest,
                                     v1::ShardLinkResponse> {
 public:
  // Runs one call to its end on `stream`, which ends by `deadline`; the
  // call's trace parent (may be empty). Returns the call's status.
  using RunCall = std::function<absl::Status(
      ShardStream* stream, absl::Time deadline, const std::string& trace)>;

  // Whether the call that starts with this request (which also ended its
  // half of the call) may run on the thread that read it.
  using InlinePolicy = std::function<bool(const v1::ShardRequest& first)>;

  // `threads` and `gate` (may be null) outlive the reactor; `runs_inline`
  // may be null (no call runs inline).
  ShardLinkReactor(DeviceThreads* threads, DrainGate* gate, RunCall run,
                   InlinePolicy runs_inline = nullptr);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override { outbox_.WriteDone(ok); }
  void OnDone() override { delete this; }

 private:
  class Call;

  // A call's first message: starts it on a pool thread, or, if
  // `run_inline` (the policy's verdict), returns it for the caller to run
  // (RunOne) once it has released mu_.
  std::shared_ptr<Call> StartCall(uint64_t id, v1::ShardLinkRequest& first,
                                  bool run_inline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RunOne(const std::shared_ptr<Call>& call);
  // True, once, when reading is over and no call is left: the caller then
  // finishes the stream (FinishStream), and is the last to touch the
  // reactor; no other thread may after it has released mu_.
  bool ClaimFinishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FinishStream() ABSL_LOCKS_EXCLUDED(mu_);

  DeviceThreads* const threads_;
  DrainGate* const gate_;
  const RunCall run_;
  const InlinePolicy runs_inline_;
  MuxOutbox<v1::ShardLinkResponse> outbox_;
  v1::ShardLinkRequest request_;  // the read in flight

  absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, std::shared_ptr<Call>> calls_
      ABSL_GUARDED_BY(mu_);
  bool reading_done_ ABSL_GUARDED_BY(mu_) = false;
  bool finishing_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_SHARD_LINK_SERVICE_H_
