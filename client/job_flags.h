// The flags that describe a job, shared by `shardctl run` and `shardctl
// plan`.
#ifndef SHARDMAP_CLIENT_JOB_FLAGS_H_
#define SHARDMAP_CLIENT_JOB_FLAGS_H_

#include <CLI/CLI.hpp>

#include "client/commands.h"

namespace shardmap {

// A number of seconds for --timeout: finite, positive and at most a year
// (CLI::Range lets NaN through, and 0, -1, inf or NaN would mean "no
// deadline" or "already expired" further down).
CLI::Validator TimeoutSeconds();

// --coordinator/--local, --mesh, --fn/--expr/--expr-file, --arg,
// --in-spec, --out, --out-spec, --overwrite, --donate, --state,
// --state-spec, --kwargs, --no-check-rep, --json, --timeout, --traceparent.
void AddJobOptions(CLI::App* cmd, RunFlags& run);

}  // namespace shardmap

#endif  // SHARDMAP_CLIENT_JOB_FLAGS_H_
