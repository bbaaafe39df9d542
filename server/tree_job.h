// Pytrees in jobs (JobSpec fields arg_tree ... state_rules): the coordinator
// flattens a job's trees before it plans, as JAX's shard_map does. Every
// leaf of the argument tree becomes one positional argument of the
// function (in leaf order: dict keys sorted), with the spec the in_specs
// prefix (or the first matching in_rules rule) gives it; the outputs get
// their specs from the out_specs prefix of out_tree (or out_rules); state
// bindings without a spec get one from state_rules.
//
// Planning errors name tree paths as JAX does ("args[0]['w']",
// "in_specs[0]") instead of flat leaf numbers.
//
// Pure logic; thread-compatible.
#ifndef SHARDMAP_SERVER_TREE_JOB_H_
#define SHARDMAP_SERVER_TREE_JOB_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/tree_def.h"
#include "server/planner.h"
#include "shardmap/v1/coordinator.pb.h"

namespace shardmap {

struct TreeJob {
  // The job with one in_spec per leaf and one out_spec per output (when it
  // has trees; otherwise the spec as sent), tree prefixes and rules
  // cleared.
  v1::JobSpec flat;
  bool has_trees = false;
  // Per argument leaf: its key path ("[0]['w']"), and the name of the spec
  // it got ("in_specs[0]", or "in_rules 'kernel'").
  std::vector<TreeLeafPath> arg_leaves;
  std::vector<std::string> in_spec_names;
  // Per output leaf of out_tree (none without one): its key path, and the
  // name of its spec.
  std::vector<TreeLeafPath> out_leaves;
  std::vector<std::string> out_spec_names;
};

// What each argument leaf is called in plans and errors: "args[0]['w']"
// (JAX's keystr) for a job with trees, else "args[i]".
std::vector<std::string> ArgLabels(const TreeJob& job);
// What each output is called in plans: "out['sum']" (keystr in
// out_tree, as shardctl run prints it) for a job with an out_tree; empty
// without one.
std::vector<std::string> OutputLabels(const TreeJob& job);

// Validates and flattens the trees of `spec`. INVALID_ARGUMENT: a malformed
// tree (ValidateTree), leaf counts that do not match args/in_specs/
// out_specs, both a prefix and rules, a prefix that does not match (JAX's
// "pytree structure error: ..." naming the key path), or a leaf no rule
// matches (naming its key path and rule path).
absl::StatusOr<TreeJob> FlattenJobTrees(const v1::JobSpec& spec);

// PlanJob of job.flat, with errors naming tree paths, and out_tree's leaf
// count checked against the function's outputs (INVALID_ARGUMENT).
absl::StatusOr<JobPlan> PlanTreeJob(const TreeJob& job,
                                    const FunctionLookup& lookup,
                                    const ResidentIndex* index,
                                    program::ProgramCache* programs);

// Fills JobResult.output_tree (the job's out_tree, if it gave one) and
// output_specs (the spec of every output).
void AddTreeResult(const v1::JobSpec& flat, const JobPlan& plan,
                   v1::JobResult* result);

}  // namespace shardmap

#endif  // SHARDMAP_SERVER_TREE_JOB_H_
