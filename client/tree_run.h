// Pytrees in `shardctl run` and `shardctl plan`: .npz arguments as dict
// trees (member keys split on '/', as put-tree names arrays), tree-shaped
// --in-spec/--out-spec prefixes (client/tree_literal.h), --in-rules and
// --out-rules (client/tree_rules.h, evaluated by the coordinator), the
// outputs' structure (--out-tree), and a tree of outputs written to one
// .npz --out.
//
// Pure functions of the flags (and the files they name).
#ifndef SHARDMAP_CLIENT_TREE_RUN_H_
#define SHARDMAP_CLIENT_TREE_RUN_H_

#include <CLI/CLI.hpp>
#include <string>

#include "absl/status/status.h"
#include "client/commands.h"
#include "client/run_request.h"
#include "client/shard_client.h"

namespace shardmap {

// --in-rules, --out-rules, --out-tree, --state-out-spec.
void AddTreeOptions(CLI::App* cmd, RunFlags& run);

// Whether the flags use pytrees: an .npz or @PREFIX/ --arg or --out, a
// tuple, list or dict in an --in-spec or --out-spec, --in-rules,
// --out-rules or --out-tree.
bool UsesTrees(const RunFlags& f);

// Sets job->in_specs, out_specs and trees from --in-spec/--in-rules and
// --out-spec/--out-rules. INVALID_ARGUMENT naming the flag for malformed
// trees, specs or rules, both specs and rules, or neither.
absl::Status ParseTreeSpecs(const RunFlags& f, JobRequest* job);

// Reads the arguments: a .npy file is a leaf, an .npz file a dict tree of
// its members, @NAME a resident leaf, @PREFIX/ a dict tree of the resident
// arrays PREFIX/KEY (listed on --coordinator); sets run->inputs, job.args,
// job.resident_args and job.trees.args, and job.trees.outputs from
// --out-tree ("args[N]": the shape of argument N; or a literal with '*'
// leaves; default with tree-shaped --out-spec: that shape), and with
// --out @PREFIX/ stores every output as PREFIX/PATH. Errors: a file
// that cannot be read (exit 66 missing, 65 malformed, through *exit_code),
// INVALID_ARGUMENT for a bad --out-tree or .npz keys that do not form a
// tree.
absl::Status ReadTreeArgs(const RunFlags& f, ParsedRun* run, int* exit_code);

// Whether the outputs are stored as a tree of resident arrays (--out
// @PREFIX/).
bool StoresTree(const RunFlags& f);

// Whether the outputs go to one .npz file (--out FILE.npz).
bool WritesTreeNpz(const RunFlags& f);

// Writes every output of `result` to the .npz `path`, keyed by its path in
// the output tree ('/'-joined; "0", "1", ... for a flat tuple).
// INVALID_ARGUMENT if an output was stored instead of returned;
// FAILED_PRECONDITION if the file cannot be written.
absl::Status WriteTreeOutputs(const std::string& path, const JobResult& result);

// Prints what a job that wrote its outputs to one .npz did (the same
// summary as run's, --json too); returns exit 0.
int ReportTreeRun(const RunFlags& f, const JobRequest& job,
                  const JobResult& result, double seconds);

}  // namespace shardmap

#endif  // SHARDMAP_CLIENT_TREE_RUN_H_
