// Idempotency keys (call_id) of the calls that change resident state
// (docs/RELIABILITY.md, scenario 17): a client that got UNAVAILABLE cannot
// know whether its call was applied, so it sends the same call again with
// the same call_id, and the coordinator answers it from here instead of
// applying it twice.
//
// The first call with a key claims it and runs. A call with a key that is
// claimed waits for the first one to finish; one with a finished key gets
// the finished call's outcome. A call that fails changed nothing (jobs
// commit only when they succeed), so its key is released and a retry runs
// anew. Outcomes are kept for `keep`, at most `max_calls` of them, and
// their returned outputs only up to `max_output_bytes` in all (newest
// kept); an outcome without its outputs answers ALREADY_EXISTS.
//
// Thread-safe.
#ifndef SHARDMAP_SERVER_CALL_REGISTRY_H_
#define SHARDMAP_SERVER_CALL_REGISTRY_H_

#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/tensor.h"

namespace shardmap {

class CallRegistry {
 public:
  struct Options {
    absl::Duration keep = absl::Minutes(10);
    size_t max_calls = 10000;
    uint64_t max_output_bytes = uint64_t{256} << 20;
    // The time outcomes expire by (tests advance a fake one). Begin's
    // deadline is real time: it comes from the caller's RPC.
    std::function<absl::Time()> clock = [] { return absl::Now(); };
    // If set, called with the call_id each time a Begin starts to wait for
    // the first call of its key, with the registry's lock held: it must not
    // call the registry. Tests use it to act once a repeat really waits.
    std::function<void(const std::string& call_id)> on_wait;
  };

  // What a finished call answered.
  struct Outcome {
    std::string job_id;    // for messages; may be empty
    std::string response;  // the serialized reply (message of the call)
    // A job's returned outputs, in order (a stored one is null).
    std::vector<std::shared_ptr<const Tensor>> outputs;
    // False once the outputs were dropped to stay under max_output_bytes.
    bool outputs_kept = true;
    uint64_t data_hash = 0;  // of the call's streamed data, if any
  };

  class Claim;
  // Either `claim` (the call is new, or its first run failed: run it) or
  // `done` (what the first run answered).
  struct Begun {
    std::unique_ptr<Claim> claim;
    std::shared_ptr<const Outcome> done;
  };

  explicit CallRegistry(const Options& options) : options_(options) {}
  CallRegistry(const CallRegistry&) = delete;
  CallRegistry& operator=(const CallRegistry&) = delete;

  // `request_hash` identifies the request (without its data); `what`
  // describes it for messages, e.g. "job matmul". INVALID_ARGUMENT when
  // the key was used for another request; DEADLINE_EXCEEDED when its first
  // call still runs at `deadline`.
  absl::StatusOr<Begun> Begin(const std::string& call_id, uint64_t request_hash,
                              const std::string& what, absl::Time deadline);

  size_t size();

 private:
  struct Entry {
    uint64_t request_hash = 0;
    std::string what;
    bool running = true;
    std::shared_ptr<const Outcome> outcome;
    absl::Time expires = absl::InfiniteFuture();
    uint64_t output_bytes = 0;
  };
  void Finish(const std::string& call_id, std::shared_ptr<Outcome> outcome);
  void Release(const std::string& call_id);
  void EvictLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  absl::Mutex mu_;
  absl::CondVar changed_;
  std::map<std::string, Entry> calls_ ABSL_GUARDED_BY(mu_);
  // Finished calls, oldest first.
  std::list<std::string> finished_ ABSL_GUARDED_BY(mu_);
  uint64_t output_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

// The right to run a call. Finish records its outcome; destroying a Claim
// that was not finished releases the key (the call failed).
class CallRegistry::Claim {
 public:
  ~Claim();
  Claim(const Claim&) = delete;
  Claim& operator=(const Claim&) = delete;
  void Finish(std::shared_ptr<Outcome> outcome);

 private:
  friend class CallRegistry;
  Claim(CallRegistry* registry, std::string call_id)
      : registry_(registry), call_id_(std::move(call_id)) {}
  CallRegistry* registry_;
  std::string call_id_;
  bool finished_ = false;
};

}  // namespace shardmap

#endif  // SHARDMAP_SERVER_CALL_REGISTRY_H_
