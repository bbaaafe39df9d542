// Test helper shared by the unit and integration tests: a bounded poll, for
// a state that a test cannot be notified of (another thread blocked in a
// wait, a pool noticing a dead worker). The sleep between checks only paces
// the poll; the condition decides.
#ifndef SHARDMAP_TESTS_UNIT_WAIT_UNTIL_H_
#define SHARDMAP_TESTS_UNIT_WAIT_UNTIL_H_

#include <functional>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace shardmap {

// Checks `done` every millisecond until it holds (true) or `limit` has
// passed (false).
inline bool WaitUntil(const std::function<bool()>& done,
                      absl::Duration limit = absl::Seconds(30)) {
  const absl::Time give_up = absl::Now() + limit;
  for (;;) {
    if (done()) return true;
    if (absl::Now() >= give_up) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
}

}  // namespace shardmap

#endif  // SHARDMAP_TESTS_UNIT_WAIT_UNTIL_H_
