// Keeps gRPC's callback threads for the rest of the process.
//
// gRPC 1.51 (without a background poller) runs every callback reaction on
// one process-wide pool of threads, which exists while any channel or
// server uses callbacks and is torn down when the last of them goes. If
// that last one goes on one of the pool's own threads (a reactor's OnDone
// dropping the last reference to a channel, as happens when a process
// shuts its server down while peer streams still end), the pool cannot
// join that thread and frees its completion queue under it: the process
// aborts in grpc_cq_internal_unref (upstream: grpc/grpc#32584).
//
// KeepCallbackPool makes the pool's users never reach zero: it starts a
// server without ports, opens an in-process channel to it, makes one
// callback call (which ties the channel to the pool) and never lets either
// go. No network is touched. Call it once from main, before any thread
// forks (gRPC must not be running in a process that forks and uses it in
// the child). Thread-safe; later calls do nothing.
#ifndef SHARDMAP_RPC_CALLBACK_POOL_H_
#define SHARDMAP_RPC_CALLBACK_POOL_H_

namespace shardmap {

// False (and a log line) if the call that ties the pool did not finish.
bool KeepCallbackPool();

}  // namespace shardmap

#endif  // SHARDMAP_RPC_CALLBACK_POOL_H_
