// Test helper shared by the unit tests: asserts a status's code and that
// its message contains every given fragment.
#ifndef SHARDMAP_TESTS_UNIT_STATUS_MATCHERS_H_
#define SHARDMAP_TESTS_UNIT_STATUS_MATCHERS_H_

#include <gtest/gtest.h>

#include <initializer_list>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"

namespace shardmap {

inline ::testing::AssertionResult StatusIs(
    const absl::Status& s, absl::StatusCode code,
    std::initializer_list<absl::string_view> parts) {
  if (s.code() != code) {
    return ::testing::AssertionFailure()
           << "expected code " << absl::StatusCodeToString(code) << ", got "
           << s;
  }
  for (absl::string_view p : parts) {
    if (!absl::StrContains(s.message(), p)) {
      return ::testing::AssertionFailure()
             << "message lacks \"" << p << "\": " << s;
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace shardmap

#endif  // SHARDMAP_TESTS_UNIT_STATUS_MATCHERS_H_
