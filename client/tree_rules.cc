#include "client/tree_rules.h"

#include <fnmatch.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "core/bounded_input.h"
#include "core/status_util.h"

namespace shardmap {
namespace {

bool Glob(absl::string_view pattern, absl::string_view path) {
  const std::string p(pattern), s(path);
  return fnmatch(p.c_str(), s.c_str(), FNM_PATHNAME) == 0;
}

// Splits at ';' (always), and at ',' outside (), [] and quotes. An item
// with unbalanced brackets or quotes is left for the spec parser to report.
std::vector<absl::string_view> SplitRules(absl::string_view text) {
  std::vector<absl::string_view> items;
  size_t start = 0;
  int depth = 0;
  char quote = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == ';' || (c == ',' && depth == 0 && quote == 0)) {
      items.push_back(text.substr(start, i - start));
      start = i + 1;
      depth = 0;
      quote = 0;
    } else if (quote != 0) {
      if (c == quote) quote = 0;
    } else if (c == '\'' || c == '"') {
      quote = c;
    } else if (c == '(' || c == '[') {
      ++depth;
    } else if ((c == ')' || c == ']') && depth > 0) {
      --depth;
    }
  }
  items.push_back(text.substr(start));
  return items;
}

}  // namespace

absl::Status ValidateTreeFilter(absl::string_view filter,
                                absl::string_view rule) {
  if (filter.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed rule \"", Truncate(rule),
                     "\": empty filter before '=' (use \"*\" to match every "
                     "path)"));
  }
  // Globs are matched by backtracking, and rules reach the coordinator
  // from clients: bound what one match can cost.
  constexpr size_t kMaxFilterBytes = 256;
  constexpr size_t kMaxWildcards = 8;
  if (filter.size() > kMaxFilterBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed rule \"", Truncate(rule), "\": filter is ",
                     filter.size(), " bytes, over ", kMaxFilterBytes));
  }
  const size_t wildcards = std::count(filter.begin(), filter.end(), '*') +
                           std::count(filter.begin(), filter.end(), '?');
  if (wildcards > kMaxWildcards) {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed rule \"", Truncate(rule), "\": filter has ",
                     wildcards, " wildcards, over ", kMaxWildcards));
  }
  absl::string_view body = filter;
  absl::ConsumePrefix(&body, "/");
  if (body.empty() || absl::StartsWith(body, "/") ||
      absl::EndsWith(body, "/") || absl::StrContains(body, "//")) {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed rule \"", Truncate(rule), "\": filter '",
                     Truncate(filter), "' has an empty path component"));
  }
  return absl::OkStatus();
}

absl::StatusOr<TreeRule> ParseTreeRule(absl::string_view text) {
  const absl::string_view rule = absl::StripAsciiWhitespace(text);
  const size_t eq = rule.find('=');
  if (eq == absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed rule \"", Truncate(rule),
                     "\": expected FILTER=SPEC, e.g. \"*/bias=P()\""));
  }
  TreeRule out;
  out.filter = std::string(absl::StripAsciiWhitespace(rule.substr(0, eq)));
  SHARD_RETURN_IF_ERROR(ValidateTreeFilter(out.filter, rule));
  auto spec =
      PartitionSpec::Parse(absl::StripAsciiWhitespace(rule.substr(eq + 1)));
  if (!spec.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rule \"", Truncate(rule), "\": ", spec.status().message()));
  }
  out.spec = spec->unsplit() ? PartitionSpec() : *std::move(spec);
  return out;
}

absl::StatusOr<std::vector<TreeRule>> ParseTreeRules(absl::string_view text) {
  std::vector<TreeRule> rules;
  for (absl::string_view item : SplitRules(text)) {
    if (absl::StripAsciiWhitespace(item).empty()) continue;
    auto rule = ParseTreeRule(item);
    if (!rule.ok()) return rule.status();
    rules.push_back(*std::move(rule));
  }
  return rules;
}

bool TreeRuleMatches(absl::string_view filter, absl::string_view path) {
  if (absl::ConsumePrefix(&filter, "/")) return Glob(filter, path);
  for (size_t pos = 0;;) {
    if (Glob(filter, path.substr(pos))) return true;
    pos = path.find('/', pos);
    if (pos == absl::string_view::npos) return false;
    ++pos;
  }
}

absl::StatusOr<size_t> MatchTreeRule(const std::vector<TreeRule>& rules,
                                     absl::string_view path) {
  for (size_t i = 0; i < rules.size(); ++i) {
    if (TreeRuleMatches(rules[i].filter, path)) return i;
  }
  if (rules.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("no sharding rule for path '", path,
                     "': no rules were given (add e.g. --rule '*=P()')"));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "no sharding rule matches path '", path, "'; tried, in order: ",
      absl::StrJoin(rules, ", ",
                    [](std::string* out, const TreeRule& r) {
                      absl::StrAppend(out, "'", r.filter, "'");
                    }),
      " (add a rule for it, e.g. --rule '", path,
      "=P()', or a catch-all '*=P()' last)"));
}

}  // namespace shardmap
