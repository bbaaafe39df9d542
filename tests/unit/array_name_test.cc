// Tests of core/array_name: the one rule for resident array names.
#include "core/array_name.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/unit/status_matchers.h"

namespace shardmap {
namespace {

std::string Segments(int n, size_t each) {
  std::string name;
  for (int i = 0; i < n; ++i) {
    if (i > 0) name += '/';
    name += std::string(each, static_cast<char>('a' + i));
  }
  return name;
}

TEST(ArrayNameTest, AcceptsPathsOfNameSegments) {
  for (const std::string& name :
       {std::string("a"), std::string("model/layer_0/w"),
        std::string("x.y-z_1"), std::string("...a"), std::string("a..b"),
        std::string("-"), std::string(255, 'x'), Segments(4, 255)}) {
    EXPECT_TRUE(ValidateArrayName(name).ok()) << ValidateArrayName(name);
  }
}

TEST(ArrayNameTest, BoundsSegmentsAndTheWhole) {
  EXPECT_TRUE(StatusIs(ValidateArrayName(std::string(256, 'x')),
                       absl::StatusCode::kInvalidArgument,
                       {"segment of 256 bytes", "at most 255"}));
  EXPECT_TRUE(StatusIs(ValidateArrayName("ok/" + std::string(300, 'y')),
                       absl::StatusCode::kInvalidArgument,
                       {"segment of 300 bytes"}));
  // 5 x 205 + 4 = 1029 bytes, every segment within its bound.
  const std::string long_name = Segments(5, 205);
  EXPECT_TRUE(StatusIs(ValidateArrayName(long_name),
                       absl::StatusCode::kInvalidArgument,
                       {"is 1029 bytes", "at most 1024"}));
  // The name is echoed cut short.
  EXPECT_LT(ValidateArrayName(long_name).message().size(), 200u);
}

TEST(ArrayNameTest, RefusesEmptyDotAndAbsolute) {
  EXPECT_TRUE(StatusIs(ValidateArrayName(""),
                       absl::StatusCode::kInvalidArgument, {"is empty"}));
  for (const char* name :
       {"/etc/passwd", "a/", "a//b", "..", "../x", "a/./b", "a/..", "."}) {
    EXPECT_TRUE(StatusIs(ValidateArrayName(name),
                         absl::StatusCode::kInvalidArgument,
                         {"non-empty segments", "'.' or '..'"}))
        << name;
  }
}

TEST(ArrayNameTest, ShowsBadCharactersEscaped) {
  EXPECT_TRUE(StatusIs(ValidateArrayName("a\nb"),
                       absl::StatusCode::kInvalidArgument,
                       {"'a\\nb'", "the character '\\n'"}));
  EXPECT_TRUE(StatusIs(ValidateArrayName(std::string("a\0b", 3)),
                       absl::StatusCode::kInvalidArgument,
                       {"the character '\\x00'"}));
  EXPECT_TRUE(StatusIs(ValidateArrayName("p%2F", "checkpoint block file"),
                       absl::StatusCode::kInvalidArgument,
                       {"checkpoint block file 'p%2F'", "'%'"}));
}

}  // namespace
}  // namespace shardmap
