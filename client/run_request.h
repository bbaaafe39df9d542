// What `shardctl run` and `shardctl plan` make of their flags: the job
// request and the argument arrays it points into.
#ifndef SHARDMAP_CLIENT_RUN_REQUEST_H_
#define SHARDMAP_CLIENT_RUN_REQUEST_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/commands.h"
#include "client/local_cluster.h"
#include "client/shard_client.h"
#include "core/tensor.h"

namespace shardmap {

struct ParsedRun {
  JobRequest job;  // job.args point into `inputs`: do not copy
  std::vector<Tensor> inputs;
};

// Everything shardctl can check before it talks to anyone (run_command.cc).
// Returns the exit code on failure through *exit_code.
absl::StatusOr<ParsedRun> ParseRun(const RunFlags& f, int* exit_code);

// The client a job command talks through: to --coordinator, or to the
// cluster --local N starts for it (stopped when this is destroyed).
struct JobConnection {
  std::unique_ptr<LocalCluster> cluster;
  std::unique_ptr<ShardClient> client;
};
// Errors: the local cluster's (exit 69) or the client's (exit 64), with
// the exit code through *exit_code.
absl::StatusOr<JobConnection> ConnectForJob(const RunFlags& f, int* exit_code);

// A program's source from --expr or --expr-file (program_commands.cc):
// empty when neither is given; INVALID_ARGUMENT for both; a file that
// cannot be read is NOT_FOUND (exit 66) or INVALID_ARGUMENT naming it.
absl::StatusOr<std::string> ProgramSource(const std::string& expr,
                                          const std::string& file,
                                          int* exit_code);

}  // namespace shardmap

#endif  // SHARDMAP_CLIENT_RUN_REQUEST_H_
