// Tests of client/tree_rules: parsing `put-tree` rules (specs with commas
// and tuples), suffix and glob matching, first match wins, and the error
// for a path no rule matches.
#include "client/tree_rules.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/unit/status_matchers.h"

namespace shardmap {
namespace {

using Entries = std::vector<PartitionSpec::Entry>;

// The status of a StatusOr, for StatusIs.
template <typename T>
absl::Status StatusOf(const absl::StatusOr<T>& s) {
  return s.status();
}

std::vector<TreeRule> MustParse(const std::string& text) {
  auto rules = ParseTreeRules(text);
  EXPECT_TRUE(rules.ok()) << text << ": " << rules.status();
  return rules.ok() ? *std::move(rules) : std::vector<TreeRule>{};
}

TEST(TreeRulesParseTest, SemicolonSeparatedWithCommasInsideSpecs) {
  const auto rules =
      MustParse("linear1/kernel=P(None,'model'); */bias = P() ;x=P('a', 'b')");
  ASSERT_EQ(rules.size(), 3u);
  EXPECT_EQ(rules[0].filter, "linear1/kernel");
  EXPECT_EQ(rules[0].spec.entries(), (Entries{{}, {"model"}}));
  EXPECT_EQ(rules[1].filter, "*/bias");
  EXPECT_EQ(rules[1].spec, PartitionSpec());
  EXPECT_EQ(rules[2].spec.entries(), (Entries{{"a"}, {"b"}}));
}

TEST(TreeRulesParseTest, CommaBetweenRulesOutsideParentheses) {
  const auto rules = MustParse("a/kernel=P(None, 'model'),*/bias=P(),c=None");
  ASSERT_EQ(rules.size(), 3u);
  EXPECT_EQ(rules[0].spec.entries(), (Entries{{}, {"model"}}));
  EXPECT_EQ(rules[1].filter, "*/bias");
  EXPECT_EQ(rules[2].filter, "c");
}

TEST(TreeRulesParseTest, TupleEntriesAndQuotedCommas) {
  const auto rules = MustParse("w=P(('x', 'y'), None);v=P(\"a\",('b','c'))");
  ASSERT_EQ(rules.size(), 2u);
  EXPECT_EQ(rules[0].spec.entries(), (Entries{{"x", "y"}, {}}));
  EXPECT_EQ(rules[1].spec.entries(), (Entries{{"a"}, {"b", "c"}}));
}

TEST(TreeRulesParseTest, NoneMeansReplicated) {
  const auto rules = MustParse("b=None");
  ASSERT_EQ(rules.size(), 1u);
  EXPECT_FALSE(rules[0].spec.unsplit());
  EXPECT_EQ(rules[0].spec, PartitionSpec());
}

TEST(TreeRulesParseTest, EmptyItemsAreSkipped) {
  EXPECT_EQ(MustParse("a=P();;b=P();").size(), 2u);
  EXPECT_TRUE(MustParse("").empty());
  EXPECT_TRUE(MustParse(" ; ").empty());
}

TEST(TreeRulesParseTest, OneRuleKeepsItsCommas) {
  auto rule = ParseTreeRule(" mlp/*/kernel = P('data', ('x','y')) ");
  ASSERT_TRUE(rule.ok()) << rule.status();
  EXPECT_EQ(rule->filter, "mlp/*/kernel");
  EXPECT_EQ(rule->spec.entries(), (Entries{{"data"}, {"x", "y"}}));
}

TEST(TreeRulesParseTest, Errors) {
  EXPECT_TRUE(StatusIs(StatusOf(ParseTreeRule("kernel")),
                       absl::StatusCode::kInvalidArgument,
                       {"malformed rule \"kernel\"", "FILTER=SPEC"}));
  EXPECT_TRUE(StatusIs(StatusOf(ParseTreeRule("=P()")),
                       absl::StatusCode::kInvalidArgument, {"empty filter"}));
  EXPECT_TRUE(StatusIs(StatusOf(ParseTreeRule("a//b=P()")),
                       absl::StatusCode::kInvalidArgument,
                       {"'a//b'", "empty path component"}));
  EXPECT_TRUE(StatusIs(StatusOf(ParseTreeRule("a/=P()")),
                       absl::StatusCode::kInvalidArgument,
                       {"empty path component"}));
  EXPECT_TRUE(StatusIs(StatusOf(ParseTreeRule("/=P()")),
                       absl::StatusCode::kInvalidArgument,
                       {"empty path component"}));
  EXPECT_TRUE(StatusIs(StatusOf(ParseTreeRule(std::string(300, 'a') + "=P()")),
                       absl::StatusCode::kInvalidArgument,
                       {"filter is 300 bytes, over 256"}));
  EXPECT_TRUE(StatusIs(StatusOf(ParseTreeRule("*a*a*a*a*a*a*a*a*b=P()")),
                       absl::StatusCode::kInvalidArgument,
                       {"filter has 9 wildcards, over 8"}));
  EXPECT_TRUE(StatusIs(StatusOf(ParseTreeRule("k=P('x'")),
                       absl::StatusCode::kInvalidArgument,
                       {"rule \"k=P('x'\"", "malformed PartitionSpec"}));
  EXPECT_TRUE(StatusIs(StatusOf(ParseTreeRules("k=P('x';b=P()")),
                       absl::StatusCode::kInvalidArgument,
                       {"rule \"k=P('x'\""}));
  EXPECT_TRUE(StatusIs(StatusOf(ParseTreeRules("k=P('x),b=P()")),
                       absl::StatusCode::kInvalidArgument,
                       {"rule \"k=P('x),b=P()\"", "malformed PartitionSpec"}));
  EXPECT_TRUE(StatusIs(StatusOf(ParseTreeRules("a=P();k=P('x'))")),
                       absl::StatusCode::kInvalidArgument,
                       {"rule \"k=P('x'))\"", "malformed PartitionSpec"}));
  // A comma inside a spec given with ',' separators but no parentheses is
  // two items, the second not a rule.
  EXPECT_TRUE(StatusIs(StatusOf(ParseTreeRules("k=None,'model'")),
                       absl::StatusCode::kInvalidArgument,
                       {"malformed rule \"'model'\""}));
}

TEST(TreeRulesMatchTest, SuffixAtPathBoundaries) {
  EXPECT_TRUE(TreeRuleMatches("kernel", "kernel"));
  EXPECT_TRUE(TreeRuleMatches("kernel", "mlp/linear1/kernel"));
  EXPECT_TRUE(TreeRuleMatches("linear1/kernel", "mlp/linear1/kernel"));
  EXPECT_TRUE(TreeRuleMatches("mlp/linear1/kernel", "mlp/linear1/kernel"));
  EXPECT_FALSE(TreeRuleMatches("1/kernel", "mlp/linear1/kernel"));
  EXPECT_FALSE(TreeRuleMatches("ernel", "mlp/linear1/kernel"));
  EXPECT_FALSE(TreeRuleMatches("linear1", "mlp/linear1/kernel"));
  EXPECT_FALSE(TreeRuleMatches("x/mlp/linear1/kernel", "mlp/linear1/kernel"));
}

TEST(TreeRulesMatchTest, Globs) {
  EXPECT_TRUE(TreeRuleMatches("*/bias", "linear1/bias"));
  EXPECT_TRUE(TreeRuleMatches("*/bias", "mlp/linear1/bias"));
  EXPECT_FALSE(TreeRuleMatches("*/bias", "bias"));
  EXPECT_TRUE(TreeRuleMatches("*", "bias"));
  EXPECT_TRUE(TreeRuleMatches("*", "mlp/linear1/kernel"));
  EXPECT_TRUE(TreeRuleMatches("linear?/kernel", "mlp/linear2/kernel"));
  EXPECT_FALSE(TreeRuleMatches("linear?/kernel", "mlp/linear12/kernel"));
  EXPECT_TRUE(TreeRuleMatches("linear[13]/*", "linear3/bias"));
  EXPECT_FALSE(TreeRuleMatches("linear[13]/*", "linear2/bias"));
  EXPECT_TRUE(TreeRuleMatches("mlp/*/kernel", "model/mlp/linear1/kernel"));
  // '*' does not cross '/'.
  EXPECT_FALSE(TreeRuleMatches("mlp/*", "mlp/linear1/kernel"));
  EXPECT_TRUE(TreeRuleMatches("*bias", "mlp/out_bias"));
}

TEST(TreeRulesMatchTest, LeadingSlashAnchors) {
  EXPECT_TRUE(TreeRuleMatches("/bias", "bias"));
  EXPECT_FALSE(TreeRuleMatches("/bias", "linear1/bias"));
  EXPECT_TRUE(TreeRuleMatches("/mlp/*/kernel", "mlp/linear1/kernel"));
  EXPECT_FALSE(TreeRuleMatches("/linear1/kernel", "mlp/linear1/kernel"));
}

TEST(TreeRulesMatchTest, FirstMatchWins) {
  const auto rules =
      MustParse("linear1/kernel=P(None,'model');*/kernel=P('model');*=P()");
  auto i = MatchTreeRule(rules, "mlp/linear1/kernel");
  ASSERT_TRUE(i.ok());
  EXPECT_EQ(*i, 0u);
  i = MatchTreeRule(rules, "mlp/linear2/kernel");
  ASSERT_TRUE(i.ok());
  EXPECT_EQ(*i, 1u);
  i = MatchTreeRule(rules, "mlp/linear2/bias");
  ASSERT_TRUE(i.ok());
  EXPECT_EQ(*i, 2u);
  // The catch-all first shadows everything after it.
  const auto greedy = MustParse("*=P();linear1/kernel=P('model')");
  i = MatchTreeRule(greedy, "linear1/kernel");
  ASSERT_TRUE(i.ok());
  EXPECT_EQ(*i, 0u);
}

TEST(TreeRulesMatchTest, NoMatchNamesThePathAndTheFilters) {
  const auto rules = MustParse("linear1/kernel=P(None,'model');*/kernel=P()");
  EXPECT_TRUE(StatusIs(StatusOf(MatchTreeRule(rules, "linear2/bias")),
                       absl::StatusCode::kInvalidArgument,
                       {"no sharding rule matches path 'linear2/bias'",
                        "'linear1/kernel', '*/kernel'", "'*=P()'"}));
  EXPECT_TRUE(StatusIs(StatusOf(MatchTreeRule({}, "w")),
                       absl::StatusCode::kInvalidArgument,
                       {"path 'w'", "no rules were given"}));
}

}  // namespace
}  // namespace shardmap
