// gRPC glue for the Worker service. RunShard adapts its call to a ShardJob
// (worker/shard_job.h), which owns the job's lifecycle (receive, turn,
// execute, send, two-phase decision); a cancelled call (the coordinator
// aborts the job) releases any collective the job is waiting in. The other
// RPCs serve the resident store: block reads, drops, checkpoint blocks,
// and the job order's skipped tickets.
//
// Thread-safe: each RunShard call is independent.
#ifndef SHARDMAP_WORKER_WORKER_SERVICE_H_
#define SHARDMAP_WORKER_WORKER_SERVICE_H_

#include <cstdint>

#include "core/device_threads.h"
#include "rpc/drain_gate.h"
#include "rpc/raw_method.h"
#include "rpc/trace_context.h"
#include "shardmap/v1/worker.grpc.pb.h"
#include "worker/grpc_job_peers.h"
#include "worker/job_sequencer.h"
#include "worker/memory_budget.h"
#include "worker/shard_executor.h"
#include "worker/shard_job.h"
#include "worker/shm_network.h"
#include "worker/store/block_reader.h"
#include "worker/store/resident_store.h"
#include "worker/transport/grpc/grpc_peer_transport.h"

namespace shardmap {

class ChannelCache;  // rpc/channel_cache.h
class WorkerService final
    : public v1::Worker::WithCallbackMethod_RunShards<v1::Worker::Service> {
 public:
  struct Options {
    // Largest total of argument bytes one job may bring to this worker.
    uint64_t max_job_bytes = uint64_t{16} << 30;
    // Longest wait for one peer message when the job does not say.
    absl::Duration collective_timeout = absl::Seconds(30);
    // The SIGTERM drain of RunShard calls; may be null. Not owned.
    DrainGate* gate = nullptr;
    // Shared memory to co-located peers; null: gRPC only. Not owned.
    ShmNetwork* shm = nullptr;
    // --memory-budget: jobs reserve their argument bytes before they are
    // allocated and their output bytes before they are sent or stored
    // (null: no budget).
    MemoryBudget* budget = nullptr;
    // The worker's channels to its peers (block reads); required. Not
    // owned.
    ChannelCache* channels = nullptr;
  };
  // `network` may be null: jobs then run without collectives.
  WorkerService(const Options& options, const ShardExecutor* executor,
                PeerNetwork* network, JobSequencer* sequencer,
                ResidentStore* store)
      : options_(options),
        sequencer_(sequencer),
        store_(store),
        peers_(network, options.shm, options.channels),
        job_services_{executor, &peers_, store, sequencer, options.budget} {
    MarkMethodStreamed(MethodIndex("shardmap.v1.Worker", "RunShard"),
                       RawBidiHandler(this, &WorkerService::RunShard));
  }

  // RunShard, served over byte buffers (its generated handler is
  // replaced) so that outputs go to the coordinator without a copy; on the
  // wire it is the same ShardRequest / ShardResponse stream.
  grpc::Status RunShard(grpc::ServerContext* context, RawServerStream* stream);
  // RunShard calls multiplexed on one stream (worker/shard_link_service.h).
  grpc::ServerBidiReactor<v1::ShardLinkRequest, v1::ShardLinkResponse>*
  RunShards(grpc::CallbackServerContext* context) override;
  grpc::Status ReadBlock(grpc::ServerContext* context,
                         const v1::ReadBlockRequest* request,
                         grpc::ServerWriter<v1::ArrayChunk>* writer) override;
  grpc::Status DropArray(grpc::ServerContext* context,
                         const v1::DropArrayRequest* request,
                         v1::DropArrayResponse* response) override;
  grpc::Status SaveBlock(grpc::ServerContext* context,
                         const v1::SaveBlockRequest* request,
                         v1::SaveBlockResponse* response) override;
  grpc::Status LoadBlock(grpc::ServerContext* context,
                         const v1::LoadBlockRequest* request,
                         v1::LoadBlockResponse* response) override;
  // Gives the tickets up in the JobSequencer (see there).
  grpc::Status SkipTickets(grpc::ServerContext* context,
                           const v1::SkipTicketsRequest* request,
                           v1::SkipTicketsResponse* response) override;

 private:
  // One RunShard call's job, on `stream`, ending by `deadline`; `gate_context`
  // is the call's for the drain gate (null on a link).
  absl::Status RunCall(ShardStream* stream, absl::Time deadline,
                       const Traceparent& span,
                       grpc::ServerContextBase* gate_context);

  const Options options_;
  // The threads that run calls arriving on job links.
  DeviceThreads link_threads_;
  JobSequencer* const sequencer_;  // Not owned.
  ResidentStore* const store_;     // Not owned.
  GrpcJobPeers peers_;
  const ShardJob::Services job_services_;
};

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_WORKER_SERVICE_H_
