// Test helper shared by the unit tests: a clock the test advances by hand,
// for the units that take one (WorkerPool, CallRegistry). Reads and
// advances are atomic, so concurrent tests may share one.
#ifndef SHARDMAP_TESTS_UNIT_FAKE_CLOCK_H_
#define SHARDMAP_TESTS_UNIT_FAKE_CLOCK_H_

#include <atomic>
#include <cstdint>

#include "absl/time/time.h"

namespace shardmap {

class FakeClock {
 public:
  absl::Time Now() const {
    return absl::UnixEpoch() + absl::Nanoseconds(ns_.load());
  }
  void Advance(absl::Duration d) { ns_ += absl::ToInt64Nanoseconds(d); }

 private:
  std::atomic<int64_t> ns_{1'000'000'000'000};
};

}  // namespace shardmap

#endif  // SHARDMAP_TESTS_UNIT_FAKE_CLOCK_H_
