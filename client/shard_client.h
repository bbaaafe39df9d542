// The C++ client library: run shard_map jobs on a shardmap coordinator,
// list its functions, read the cluster's status.
//
//   auto client = ShardClient::Create({.address = "127.0.0.1:7070"});
//   JobRequest job;
//   job.function = "matmul";
//   job.mesh = *Mesh::Parse("x=2,y=2");
//   job.args = {&a, &b};
//   job.in_specs = {*PartitionSpec::Parse("P('x', 'y')"),
//                   *PartitionSpec::Parse("P('y', None)")};
//   job.out_specs = {*PartitionSpec::Parse("P('x', None)")};
//   absl::StatusOr<JobResult> result = (*client)->Run(job);
//
// Thread-safe: one client may run many jobs at once.
#ifndef SHARDMAP_CLIENT_SHARD_CLIENT_H_
#define SHARDMAP_CLIENT_SHARD_CLIENT_H_

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/tree_rules.h"
#include "core/mesh.h"
#include "core/partition_spec.h"
#include "core/tensor.h"
#include "rpc/credentials.h"
#include "rpc/raw_method.h"
#include "shardmap/v1/coordinator.grpc.pb.h"
#include "wire/proto_convert.h"

namespace shardmap {

struct JobRequest {
  std::string function;
  // An expression program's source to run instead of `function` (leave
  // that empty): `lambda x, w: psum(x @ w, 'i')` or a `def`.
  std::string program;
  // Unset: Options::default_mesh if set (JAX's set_mesh), else the mesh of
  // the job's resident arguments (all must share one; JAX's Infer).
  std::optional<Mesh> mesh;
  // JAX's axis_names: the manual mesh axes (the others are auto: the
  // function's work is repeated along them); empty: every axis. Or the
  // legacy auto: the auto axes. Giving both, they must be complements.
  std::vector<std::string> axis_names;
  std::vector<std::string> auto_axes;
  // Not owned; must outlive Run. An entry may be null when the argument is
  // a resident array (resident_args).
  std::vector<const Tensor*> args;
  // Per argument: a resident array's name to use instead of args[i]
  // (empty, or shorter than args: the data in args). The workers reshard
  // it among themselves if in_specs asks for another sharding.
  std::vector<std::string> resident_args;
  // Per output: store it as a resident array of this name (sharded by its
  // out_spec) instead of returning it.
  std::vector<std::string> resident_outputs;
  bool overwrite = false;  // replace a resident array of another shape
  // JAX's donate_argnums: positions in resident_args whose arrays the job
  // may consume (JobSpec.donate_args: each must be stored back by an
  // output of the same name and sharding; lost if the job fails).
  std::vector<int> donate_args;
  // The function's state slots bound to resident arrays; a state's spec
  // defaults to P() (replicated), as brainstate's.
  struct State {
    std::string slot;
    std::string name;
    std::optional<PartitionSpec> spec;
    // For a slot the function writes: the sharding it is stored back in
    // (brainstate's state_out_specs); unset: as `spec`.
    std::optional<PartitionSpec> out_spec;
  };
  std::vector<State> states;
  // Pytrees (JobSpec.arg_tree ... state_rules in coordinator.proto;
  // client/tree_def.h builds them). Unset or empty: flat, as above.
  struct Trees {
    std::optional<v1::TreeNode> args;  // a tuple; its leaves are `args`
    // A prefix of `args` whose leaves are in_specs (JAX's in_specs tree).
    std::optional<v1::TreeNode> in_specs;
    std::vector<TreeRule> in_rules;         // instead of in_specs
    std::optional<v1::TreeNode> outputs;    // the outputs' structure
    std::optional<v1::TreeNode> out_specs;  // a prefix of `outputs`
    std::vector<TreeRule> out_rules;
    // For states bound without a spec, by slot name ("*" for all).
    std::vector<TreeRule> state_rules;
  };
  Trees trees;
  // One per argument, or one for all. PartitionSpec::Infer() takes a
  // resident argument's own spec; none at all with every argument
  // resident: each argument's own spec.
  std::vector<PartitionSpec> in_specs;
  // One per output, or one for all.
  std::vector<PartitionSpec> out_specs;
  std::string kwargs_json;  // a JSON object, or empty
  bool check_rep = true;
  absl::Duration timeout = absl::Minutes(10);
  // W3C traceparent sent with the job (the coordinator and workers log its
  // trace id); empty: Run starts a new trace.
  std::string traceparent;
  // Idempotency key (JobSpec.call_id): a job sent again with it is not run
  // twice. Empty: Run makes one if it may retry (Options::retries) a job
  // that writes resident arrays.
  std::string call_id;
};

// Whether a job changes resident state (stores outputs or binds states):
// one that must not run twice.
bool WritesState(const JobRequest& job);

// The JobSpec a job is sent with (argument headers from job.args; no
// data, no call_id), with `default_mesh` when the job names no mesh.
v1::JobSpec JobSpecOf(const JobRequest& job,
                      const std::optional<Mesh>& default_mesh = std::nullopt);

struct JobResult {
  std::string job_id;
  // The outputs that were returned, in order (stored ones are skipped).
  std::vector<Tensor> outputs;
  // The outputs stored as resident arrays: (name, dtype and shape).
  std::vector<std::pair<std::string, ArrayMeta>> stored;
  double coordinator_seconds = 0;  // time the coordinator spent
  int num_devices = 0;
  std::string traceparent;  // the one the job was sent with
  // The structure of all outputs (returned and stored, in order), when the
  // job gave one (JobRequest::trees.outputs).
  std::optional<v1::TreeNode> output_tree;
  // Per output (returned and stored): the spec it was assembled by.
  std::vector<PartitionSpec> output_specs;
};

class ShardClient {
 public:
  struct Options {
    std::string address = "127.0.0.1:7070";  // the coordinator
    // Deadline of the quick RPCs (status, functions).
    absl::Duration rpc_timeout = absl::Seconds(10);
    // TLS and token; unset: the process's default (core/credentials.h).
    std::optional<ChannelSecurity> security = std::nullopt;
    // Times a call that failed with UNAVAILABLE is sent again (after 0.2 s,
    // 0.4 s, 0.8 s, ... at most 5 s), where that is safe: a call that
    // changes no resident state, or one with a call_id.
    int retries = 0;
    // The mesh of jobs that name none (JobRequest::mesh unset), as JAX's
    // jax.set_mesh; a job's own mesh wins. Unset: such a job takes its
    // resident arguments' mesh.
    std::optional<Mesh> default_mesh = std::nullopt;
  };
  static absl::StatusOr<std::unique_ptr<ShardClient>> Create(
      const Options& options);

  // Runs one job. Errors are the coordinator's (see coordinator.proto):
  // INVALID_ARGUMENT, NOT_FOUND, FAILED_PRECONDITION, UNAVAILABLE,
  // DEADLINE_EXCEEDED; UNAVAILABLE also when the coordinator is down.
  // A job that writes state, has no call_id and ends with UNAVAILABLE or
  // DEADLINE_EXCEEDED may or may not have been applied: its status says so
  // and carries the NotSafeToRetry mark.
  absl::StatusOr<JobResult> Run(const JobRequest& job) const;
  absl::StatusOr<std::vector<v1::FunctionSignature>> ListFunctions() const;
  absl::StatusOr<v1::ClusterStatusResponse> Status() const;

  // Expression programs by name (client/program_calls.cc). Register's
  // errors: INVALID_ARGUMENT (bad name, or a source that does not parse:
  // line, column and caret), ALREADY_EXISTS (a built-in's name, or
  // registered and not `replace`). Unregister's: NOT_FOUND.
  absl::StatusOr<v1::RegisterProgramResponse> RegisterProgram(
      const std::string& name, const std::string& source,
      bool replace = false) const;
  absl::Status UnregisterProgram(const std::string& name) const;
  // Plans `job` as Run would, without running it or moving data (only the
  // argument headers are sent): shapes, costs and pictures. Errors are
  // Run's planning errors.
  absl::StatusOr<v1::PlanResponse> Plan(const JobRequest& job) const;

  // Resident arrays. Put shards `array` by `spec` over `mesh` onto the
  // workers (FAILED_PRECONDITION over an existing name of another shape or
  // dtype unless `overwrite`); Get assembles one back (NOT_FOUND,
  // FAILED_PRECONDITION if a worker holding it was lost, or DATA_LOSS if
  // copies that should be equal differ).
  absl::StatusOr<v1::ResidentInfo> Put(const std::string& name,
                                       const Tensor& array, const Mesh& mesh,
                                       const PartitionSpec& spec,
                                       bool overwrite = false,
                                       const std::string& call_id = "") const;
  absl::StatusOr<Tensor> Get(const std::string& name) const;
  absl::StatusOr<std::vector<v1::ResidentInfo>> List(
      const std::string& prefix = "") const;
  // With a call_id, a retried delete that succeeded before succeeds again.
  absl::Status Delete(const std::string& name,
                      const std::string& call_id = "") const;
  // Checkpoints of every resident array (see coordinator.proto).
  absl::StatusOr<std::vector<v1::ResidentInfo>> Save(
      const std::string& directory) const;
  absl::StatusOr<std::vector<v1::ResidentInfo>> Restore(
      const std::string& directory) const;
  // Whether `status` is a state-changing call's failure that leaves
  // unknown whether it was applied (it had no call_id to retry with).
  static bool NotSafeToRetry(const absl::Status& status);

  // Polls Status until at least `n` workers are live. DEADLINE_EXCEEDED
  // saying how many registered if `timeout` passes first.
  absl::Status WaitForWorkers(int n, absl::Duration timeout) const;

 private:
  explicit ShardClient(const Options& options);
  absl::StatusOr<JobResult> RunOnce(const JobRequest& job, absl::Time deadline,
                                    const std::string& traceparent) const;
  absl::StatusOr<std::vector<v1::ResidentInfo>> Checkpoint(
      const std::string& directory, bool restore) const;
  // Calls `attempt` until it succeeds, fails other than UNAVAILABLE, or
  // options_.retries are spent, or the next try would start after
  // `deadline`; only once unless `safe`.
  template <typename F>
  auto Retrying(bool safe, F attempt,
                absl::Time deadline = absl::InfiniteFuture()) const
      -> decltype(attempt());
  const Options options_;
  std::unique_ptr<v1::Coordinator::Stub> stub_;
  // RunJob over byte buffers: the arguments' bytes leave without a copy.
  std::unique_ptr<RawBidiMethod> run_job_;
};

}  // namespace shardmap

#endif  // SHARDMAP_CLIENT_SHARD_CLIENT_H_
