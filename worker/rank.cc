#include "worker/rank.h"

#include <unistd.h>

#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace shardmap {
namespace {

absl::StatusOr<int64_t> ParseRank(const std::string& text,
                                  const std::string& source) {
  int64_t rank = 0;
  if (!absl::SimpleAtoi(text, &rank) || rank < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, " must be a rank (an integer, 0 or more), got '", text, "'"));
  }
  return rank;
}

}  // namespace

absl::StatusOr<std::optional<int64_t>> ResolveRank(const RankSources& s) {
  if (s.flag.has_value()) {
    if (*s.flag < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--rank must be 0 or more, got ", *s.flag));
    }
    return s.flag;
  }
  if (s.from_hostname) {
    const size_t dash = s.hostname.rfind('-');
    const std::string source =
        absl::StrCat("--rank-from-hostname: the host name '", s.hostname,
                     "' must end in -<n>, and <n>");
    if (dash == std::string::npos) return ParseRank("", source);
    return ParseRank(s.hostname.substr(dash + 1), source);
  }
  for (const char* name :
       {"SHARDMAP_RANK", "JOB_COMPLETION_INDEX", "LWS_WORKER_INDEX"}) {
    std::optional<std::string> value = s.getenv ? s.getenv(name) : std::nullopt;
    if (!value.has_value() || value->empty()) continue;
    return ParseRank(*value, absl::StrCat("the environment variable ", name));
  }
  return std::optional<int64_t>();
}

RankSources SystemRankSources(std::optional<int64_t> flag, bool from_hostname) {
  RankSources s;
  s.flag = flag;
  s.from_hostname = from_hostname;
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) == 0) s.hostname = host;
  s.getenv = [](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
  return s;
}

}  // namespace shardmap
