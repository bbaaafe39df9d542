// Tests of core/bounded_input (JSON depth, truncated echoes) and of the
// parsers that use it: --kwargs, signatures' messages, gRPC statuses.
#include "core/bounded_input.h"

#include <gtest/gtest.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "core/status_util.h"
#include "rpc/grpc_status.h"
#include "tests/unit/status_matchers.h"
#include "wire/signature.h"

namespace shardmap {
namespace {

std::string Nested(int depth, absl::string_view inner = "") {
  return absl::StrCat(std::string(depth, '['), inner, std::string(depth, ']'));
}

TEST(TruncateTest, ShortValuesPassWhole) {
  EXPECT_EQ(Truncate("abc"), "abc");
  EXPECT_EQ(Truncate(std::string(kMaxEchoBytes, 'x')),
            std::string(kMaxEchoBytes, 'x'));
  EXPECT_EQ(Truncate(""), "");
}

TEST(TruncateTest, LongValuesAreCutAndSayTheirSize) {
  EXPECT_EQ(Truncate(std::string(1000, 'x'), 10),
            absl::StrCat(std::string(10, 'x'), "... (1000 bytes)"));
}

TEST(TruncateTest, NeverSplitsAUtf8Character) {
  // "é" is 2 bytes: a cut after 3 bytes would split the second one.
  EXPECT_EQ(Truncate("a\xc3\xa9\xc3\xa9xyz", 4), "a\xc3\xa9... (8 bytes)");
}

TEST(JsonDepthTest, CountsArraysAndObjectsUpToTheLimit) {
  EXPECT_TRUE(CheckJsonDepth(Nested(64), "x").ok());
  EXPECT_TRUE(
      StatusIs(CheckJsonDepth(Nested(65), "--kwargs JSON"),
               absl::StatusCode::kInvalidArgument,
               {"--kwargs JSON nests deeper than 64 levels", "at byte 64"}));
  std::string objects;
  for (int i = 0; i < 65; ++i) objects += "{\"a\":";
  objects += "1" + std::string(65, '}');
  EXPECT_FALSE(CheckJsonDepth(objects, "x").ok());
  EXPECT_TRUE(CheckJsonDepth(objects, "x", 65).ok());
}

TEST(JsonDepthTest, BracketsInStringsDoNotCount) {
  const std::string text =
      absl::StrCat("{\"k\": \"", std::string(500, '['), "\\\"",
                   std::string(500, '{'), "\", \"e\": \"\\\\\"}");
  EXPECT_TRUE(CheckJsonDepth(text, "x").ok());
  EXPECT_TRUE(ParseJson(text, "x").ok());
  // An escaped quote does not end the string; an escaped backslash does
  // not escape the quote after it.
  EXPECT_FALSE(
      CheckJsonDepth(absl::StrCat("[\"\\\\\"", Nested(64), "]"), "x").ok());
}

TEST(JsonDepthTest, UnbalancedClosersCannotHideDepth) {
  EXPECT_FALSE(CheckJsonDepth(std::string(100, ']') + Nested(65), "x").ok());
}

TEST(ParseJsonTest, RefusesHugeDepthQuicklyWithAShortMessage) {
  // 75,000 levels used to overflow the stack when copied or dumped.
  const auto parsed = ParseJson(Nested(75000), "manifest 'm.json'");
  EXPECT_TRUE(StatusIs(parsed.status(), absl::StatusCode::kInvalidArgument,
                       {"malformed manifest 'm.json' nests deeper than 64"}));
  EXPECT_LT(parsed.status().message().size(), 200u);
}

TEST(ParseJsonTest, ParsesAndReportsMalformedTextBriefly) {
  auto ok = ParseJson("{\"a\": [1, 2]}", "x");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ((*ok)["a"][1], 2);
  const auto bad =
      ParseJson(absl::StrCat("[\"", std::string(50000, 'q')), "--kwargs JSON");
  EXPECT_TRUE(StatusIs(bad.status(), absl::StatusCode::kInvalidArgument,
                       {"malformed --kwargs JSON at byte", "bytes)"}));
  EXPECT_LT(bad.status().message().size(), 400u);
  EXPECT_TRUE(StatusIs(ParseJson("[1e999999]", "x").status(),
                       absl::StatusCode::kInvalidArgument, {"malformed x"}));
}

TEST(ParseKwargsTest, DeepAndLongValuesGiveShortMessages) {
  const std::string deep = absl::StrCat("{\"alpha\": ", Nested(5000), "}");
  const auto parsed = ParseKwargs(deep);
  EXPECT_TRUE(StatusIs(parsed.status(), absl::StatusCode::kInvalidArgument,
                       {"--kwargs JSON", "nests deeper than 64 levels"}));
  EXPECT_LT(parsed.status().message().size(), 500u);

  const std::string long_text(20000, 'v');
  const auto value = ParseKwargs(absl::StrCat("[\"", long_text, "\"]"));
  EXPECT_TRUE(StatusIs(value.status(), absl::StatusCode::kInvalidArgument,
                       {"must be a JSON object", "(20004 bytes)"}));
  EXPECT_LT(value.status().message().size(), 500u);

  v1::FunctionSignature sig =
      Signature("scale", 1).Kwarg("alpha", "number").proto();
  auto kwargs = ParseKwargs(
      absl::StrCat("{\"alpha\": \"", long_text, "\", \"", long_text, "\": 1}"));
  ASSERT_TRUE(kwargs.ok()) << kwargs.status();
  const auto checked = CheckCall(sig, {DType::kFloat32}, *kwargs);
  EXPECT_EQ(checked.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_LT(checked.status().message().size(), 500u) << checked.status();
}

TEST(ToGrpcStatusTest, CapsTheMessageAGrpcTrailerCarries) {
  const grpc::Status s =
      ToGrpcStatus(absl::InvalidArgumentError(std::string(100000, 'm')));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_LT(s.error_message().size(), 4096u + 40);
  EXPECT_NE(s.error_message().find("(100000 bytes)"), std::string::npos);
}

}  // namespace
}  // namespace shardmap
