// Orderly shutdown on SIGINT/SIGTERM for the binaries: block the signals in
// every thread (call first in main, before any thread starts), then wait
// for one with sigwait on the main thread.
#ifndef SHARDMAP_CORE_SIGNALS_H_
#define SHARDMAP_CORE_SIGNALS_H_

#include "absl/time/time.h"

namespace shardmap {

void BlockTerminationSignals();
// Blocks until SIGINT or SIGTERM arrives; returns the signal number.
int WaitForTerminationSignal();

// A last resort for the shutdown after a signal: if the process is still
// running `bound` from now (a handler that ignores cancellation), it says
// so on stderr and exits with status 0 - the drain already cancelled
// every job, so the exit is orderly from the cluster's point of view.
void ExitIfShutdownHangs(absl::Duration bound);

}  // namespace shardmap

#endif  // SHARDMAP_CORE_SIGNALS_H_
