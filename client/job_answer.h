// The answer of one job on its RunJob stream, as the C++ client reads it:
// the JobResult, then the returned outputs, inside it (small ones) or as the
// chunk messages that follow, each placed into its tensor as it arrives.
//
// Not thread-safe: one reader per stream.
#ifndef SHARDMAP_CLIENT_JOB_ANSWER_H_
#define SHARDMAP_CLIENT_JOB_ANSWER_H_

#include "absl/status/status.h"
#include "client/shard_client.h"
#include "rpc/chunk_message.h"

namespace shardmap {

// Reads the answer into `result` (its job id, figures, outputs and stored
// outputs) until the stream ends. INTERNAL for a message that is not a
// RunJobResponse, chunks before the result or another message after it;
// the outputs' own errors (a header that does not parse, a chunk out of
// place, an output left incomplete). Stops at the first error, for the
// caller to cancel the call. OK with nothing read when the stream ended
// first: the call's status then says why.
absl::Status ReadJobAnswer(RawReader* stream, JobResult* result);

}  // namespace shardmap

#endif  // SHARDMAP_CLIENT_JOB_ANSWER_H_
