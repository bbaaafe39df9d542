// Which job link calls a worker runs on the thread that read them.
//
// A call on a job link (worker/shard_link_service.h) is normally handed to
// a pooled thread, because it may wait: for its turn among the worker's
// jobs, for more of its messages, for resident blocks or collective
// messages from its peers, for the coordinator's decision. Each hand-off
// costs a thread wake-up, which on a busy host is a good part of a tiny
// job's time. A call that can wait for nothing runs on the link's own
// thread instead, before the link reads its next message: the whole call
// came in its first message (`writes_done`), its function is local
// (FunctionDef::local: no collectives, no states), its arguments travel
// inside that message and are small, its outputs are bounded small enough
// to leave inside its answer (so it never waits for room on the link),
// it reads and writes no resident array, and its turn has come.
//
// Such a call cannot see a cancel while it runs (the link reads nothing
// meanwhile); it needs none: it only computes, on at most
// kInlineChunkBytes of arguments.
#ifndef SHARDMAP_WORKER_INLINE_CALL_H_
#define SHARDMAP_WORKER_INLINE_CALL_H_

#include "shardmap/v1/worker.pb.h"
#include "worker/job_sequencer.h"
#include "worker/shard_executor.h"

namespace shardmap {

// Whether the call that `first` (its first message, which also ended its
// half of the call) starts may run on the thread that read it. `sequencer`
// may be null (jobs run as they arrive).
bool RunsInline(const v1::ShardRequest& first, const ShardExecutor& executor,
                JobSequencer* sequencer);

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_INLINE_CALL_H_
