// Sharding rules for `shardctl put-tree`: which PartitionSpec each array of a
// model file gets, chosen by the array's path (flax nnx style).
//
// Rule text: FILTER=SPEC, several separated by ';' (or by ',' outside
// parentheses, brackets and quotes, so the commas inside a spec are safe):
//
//   linear1/kernel=P(None, 'model'); */bias=P(); *=P()
//
// A filter matches a path ("mlp/linear1/kernel") if it matches the whole
// path or a trailing part of it that starts after a '/': "kernel",
// "linear1/kernel" and "mlp/linear1/kernel" all match it, "1/kernel" does
// not. Filters are fnmatch(3) patterns ('*', '?', '[...]'; '*' and '?' never
// match '/'), so "*/bias" matches any bias one level down or deeper and "*"
// matches every path. A leading '/' anchors the filter at the start of the
// path: "/bias" matches the top-level "bias" only. The first rule that
// matches wins. SPEC is PartitionSpec text; None means P() (replicated).
//
// Immutable values; safe to share between threads.
#ifndef SHARDMAP_CLIENT_TREE_RULES_H_
#define SHARDMAP_CLIENT_TREE_RULES_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/partition_spec.h"

namespace shardmap {

struct TreeRule {
  std::string filter;  // as written, trimmed
  PartitionSpec spec;
};

// INVALID_ARGUMENT quoting `rule` (the rule's text, for the message) for an
// empty filter or one with an empty path component ("a//b", "a/").
absl::Status ValidateTreeFilter(absl::string_view filter,
                                absl::string_view rule);

// Parses one FILTER=SPEC rule (the text of one --rule; commas are part of
// the spec). INVALID_ARGUMENT quoting the rule for a missing '=', an empty
// filter, a filter with an empty path component ("a//b", "a/") or malformed
// spec text.
absl::StatusOr<TreeRule> ParseTreeRule(absl::string_view text);

// Parses a list of rules (the text of --rules), in order. Empty items (a
// trailing ';') are skipped. Same errors as ParseTreeRule.
absl::StatusOr<std::vector<TreeRule>> ParseTreeRules(absl::string_view text);

// Whether `filter` matches `path` (see above).
bool TreeRuleMatches(absl::string_view filter, absl::string_view path);

// The index of the first rule that matches `path`. INVALID_ARGUMENT naming
// the path and the filters tried when none does.
absl::StatusOr<size_t> MatchTreeRule(const std::vector<TreeRule>& rules,
                                     absl::string_view path);

}  // namespace shardmap

#endif  // SHARDMAP_CLIENT_TREE_RULES_H_
