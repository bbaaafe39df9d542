#include "ops/signals.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <thread>

#include "absl/time/clock.h"

namespace shardmap {
namespace {
sigset_t TerminationSet() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}
}  // namespace

void BlockTerminationSignals() {
  sigset_t set = TerminationSet();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  // A closed pipe (a vanished reader of our stdout) is an error to report,
  // not a reason to die.
  signal(SIGPIPE, SIG_IGN);
}

int WaitForTerminationSignal() {
  sigset_t set = TerminationSet();
  int sig = 0;
  while (sigwait(&set, &sig) != 0) {
  }
  return sig;
}

void ExitIfShutdownHangs(absl::Duration bound) {
  std::thread([bound] {
    absl::SleepFor(bound);
    std::fprintf(stderr, "shutdown still running after %s; exiting now\n",
                 absl::FormatDuration(bound).c_str());
    _exit(0);
  }).detach();
}

}  // namespace shardmap
