// shardctl's exit codes (sysexits(3)), and which status maps to which.
//
//   0  ok
//   64 usage: bad flags, malformed spec/mesh/kwargs text, unknown function
//   65 bad input data: malformed .npy, or a job the coordinator rejected as
//      invalid (shapes, specs, dtypes); `restore` of a damaged or edited
//      checkpoint (DATA_LOSS)
//   66 an input file does not exist
//   69 unavailable: coordinator unreachable, not enough live workers, a
//      worker was lost
//   70 internal error
//   73 cannot create an output file; a repeated call_id whose outputs the
//      coordinator no longer keeps (ALREADY_EXISTS); `save DIR` onto a DIR
//      that is neither empty nor a checkpoint (kReasonCheckpointDirRefused)
//   75 temporary failure: deadline exceeded, resources exhausted; retry
//      (but 69 for a state-changing call without a call_id whose outcome is
//      unknown: ShardClient::NotSafeToRetry)
//   77 permission denied / unauthenticated (missing or wrong token)
//   78 bad security configuration (kExitConfig, rpc/credentials.h)
#ifndef SHARDMAP_CLIENT_EXIT_CODES_H_
#define SHARDMAP_CLIENT_EXIT_CODES_H_

#include "absl/status/status.h"
#include "core/exit_codes.h"

namespace shardmap {

// The exit code for a status from the coordinator.
int ExitCodeForStatus(const absl::Status& status);

}  // namespace shardmap

#endif  // SHARDMAP_CLIENT_EXIT_CODES_H_
