// Orderly shutdown on SIGINT/SIGTERM for the binaries: block the signals in
// every thread (call first in main, before any thread starts), then wait
// for one with sigwait on the main thread.
#ifndef SHARDMAP_CORE_SIGNALS_H_
#define SHARDMAP_CORE_SIGNALS_H_

namespace shardmap {

void BlockTerminationSignals();
// Blocks until SIGINT or SIGTERM arrives; returns the signal number.
int WaitForTerminationSignal();

}  // namespace shardmap

#endif  // SHARDMAP_CORE_SIGNALS_H_
